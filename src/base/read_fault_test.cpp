// The read-fault seam: a fault hits only reads of its file that overlap its
// range, as often as it was told; SLUICE_FAULT_READ arms the same faults and
// a bad spec is refused naming the variable; read_exact reports an injected
// fault like a real one and the health record says failing until a pass is ok.
#include "base/read_fault.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"

namespace sluice {
namespace {

TEST(ReadFault, HitsOverlappingReadsOfItsFileAsOftenAsTold) {
  clear_read_faults();
  EXPECT_EQ(read_fault("/m/a.bin", 0, 100, 100), 100);  // nothing armed
  add_read_fault({FaultKind::eio, "a.bin", 1000, 10, 2});
  EXPECT_EQ(read_fault("/m/a.bin", 0, 1000, 1000), 1000);   // ends where the range begins
  EXPECT_EQ(read_fault("/m/a.bin", 1010, 50, 50), 50);      // starts where it ends
  EXPECT_EQ(read_fault("/m/b.bin", 900, 200, 200), 200);    // another file
  EXPECT_EQ(read_fault("/m/a.bin", 900, 200, 200), -EIO);
  EXPECT_EQ(read_fault("/m/a.bin", 1005, 1, 1), -EIO);
  EXPECT_EQ(read_fault("/m/a.bin", 900, 200, 200), 200);    // spent
  EXPECT_EQ(read_faults_fired(), 2u);
  clear_read_faults();
  add_read_fault({FaultKind::short_read, "a.bin", 1000, 10, -1});
  EXPECT_EQ(read_fault("/m/a.bin", 900, 200, 200), 100);    // as if the file ended at 1000
  EXPECT_EQ(read_fault("/m/a.bin", 1000, 200, 200), 0);
  EXPECT_EQ(read_fault("/m/a.bin", 900, 200, -EINTR), -EINTR);  // a failed read stays failed
  EXPECT_EQ(read_fault("/m/a.bin", 900, 200, 200), 100);    // until cleared
  clear_read_faults();
  EXPECT_EQ(read_fault("/m/a.bin", 900, 200, 200), 200);
}

TEST(ReadFault, EnvironmentArmsFaultsAndABadSpecIsRefused) {
  clear_read_faults();
  ASSERT_EQ(setenv("SLUICE_FAULT_READ", "eio:a.bin:4096+1:1;short:b.bin:0+8", 1), 0);
  arm_read_faults_from_env();
  EXPECT_EQ(read_fault("/x/a.bin", 0, 8192, 8192), -EIO);
  EXPECT_EQ(read_fault("/x/a.bin", 0, 8192, 8192), 8192);
  EXPECT_EQ(read_fault("/x/b.bin", 0, 8192, 8192), 0);
  clear_read_faults();
  for (const char* bad : {"eio:a.bin", "what:a.bin:0+1", "eio::0+1", "eio:a.bin:x+1", "eio:a.bin:0-1", "eio:a.bin:0+1:y"}) {
    ASSERT_EQ(setenv("SLUICE_FAULT_READ", bad, 1), 0);
    try {
      arm_read_faults_from_env();
      ADD_FAILURE() << bad << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SLUICE_FAULT_READ"), std::string::npos) << e.what();
    }
  }
  unsetenv("SLUICE_FAULT_READ");
  clear_read_faults();
}

TEST(ReadFault, ReadExactReportsAnInjectedFaultAndHealthRecoversAfterAPass) {
  const std::string path = (std::filesystem::temp_directory_path() / "sluice-read-fault-test.bin").string();
  const std::vector<uint8_t> bytes(10000, 7);
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  clear_read_faults();
  add_read_fault({FaultKind::eio, "sluice-read-fault-test.bin", 5000, 1, 1});
  std::vector<uint8_t> out(1000);
  try {
    read_exact(path, out.data(), 1000, 4500);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("offset 4500"), std::string::npos) << what;
  }
  const ReadHealth h = read_health();
  EXPECT_TRUE(h.failing);
  EXPECT_NE(h.last_error.find(path), std::string::npos) << h.last_error;
  read_exact(path, out.data(), 1000, 4500);  // spent: reads fine
  EXPECT_EQ(out, std::vector<uint8_t>(1000, 7));
  note_reads_ok();
  EXPECT_FALSE(read_health().failing);
  EXPECT_GE(read_health().failures, h.failures);
  clear_read_faults();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice
