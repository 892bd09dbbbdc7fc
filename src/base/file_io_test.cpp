#include "base/file_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"

namespace sluice {
namespace {

struct TempFile {
  std::string path = ::testing::TempDir() + "file_io_test_" + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ~TempFile() {
    ::close(fd);
    std::remove(path.c_str());
  }
};

TEST(FileIo, WritesAndReadsExactly) {
  TempFile f;
  ASSERT_GE(f.fd, 0);
  std::vector<uint8_t> bytes(10u << 20);
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = uint8_t(i * 131 + (i >> 12));
  write_exact(f.fd, bytes.data(), bytes.size(), 0, f.path);
  std::vector<uint8_t> back(1000);
  read_exact(f.fd, back.data(), back.size(), 12345, f.path);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), bytes.begin() + 12345));
  // A range in chunks: every byte once, in order (4 MiB chunks: three here).
  std::vector<uint8_t> seen;
  int chunks = 0;
  read_range(f.fd, 7, bytes.size() - 7, f.path, [&](const uint8_t* p, size_t n) {
    seen.insert(seen.end(), p, p + n);
    chunks++;
  });
  EXPECT_EQ(chunks, 3);
  EXPECT_TRUE(std::equal(seen.begin(), seen.end(), bytes.begin() + 7));
  EXPECT_EQ(seen.size(), bytes.size() - 7);
}

TEST(FileIo, ShortReadIsAnErrorNamingTheFile) {
  TempFile f;
  ASSERT_TRUE(pwrite_full(f.fd, "abcdef", 6, 0));
  char buf[8];
  EXPECT_FALSE(pread_full(f.fd, buf, 8, 0));
  EXPECT_TRUE(pread_full(f.fd, buf, 6, 0));
  try {
    read_exact(f.fd, buf, 4, 4, f.path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(f.path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_range(f.fd, 2, 10, f.path, [](const uint8_t*, size_t) {}), Error);
}

}  // namespace
}  // namespace sluice
