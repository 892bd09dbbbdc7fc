#include "base/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/disk_full_test_util.h"
#include "base/error.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path path = fs::path(::testing::TempDir()) / ("atomic-file-" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The directory holds `name` alone (no temp left behind), with `content`.
void expect_only(const Dir& d, const std::string& name, const std::string& content) {
  EXPECT_EQ(read_all(d / name), content);
  EXPECT_EQ(d.names(), std::vector<std::string>{name});
}

TEST(AtomicFile, ReplacesTheFileOnlyAtCommit) {
  Dir d;
  const std::string p = d / "a.json";
  write_file_atomic(p, "old");
  {
    AtomicFile f(p);
    f.write("new ", 4);
    f.write("bytes", 5);
    EXPECT_EQ(f.at(), 9u);
    EXPECT_EQ(read_all(p), "old");  // not yet
    EXPECT_EQ(d.names(), (std::vector<std::string>{".tmp-a.json", "a.json"}));
    f.commit(9);
  }
  expect_only(d, "a.json", "new bytes");
}

TEST(AtomicFile, AnAbandonedWriteLeavesTheOldFileAndNoTemp) {
  Dir d;
  const std::string p = d / "a.bin";
  write_file_atomic(p, "old");
  try {
    AtomicFile f(p);
    f.write("partial", 7);
    throw Error("the producer failed");
  } catch (const Error&) {
  }
  expect_only(d, "a.bin", "old");
}

TEST(AtomicFile, AFullDiskMidwayLeavesTheOldFileAndNoTemp) {
  Dir d;
  const std::string p = d / "model.bin";
  write_file_atomic(p, "old contents");
  const std::string big(1 << 20, 'x');
  {
    testing::DiskFullAfter full(64 << 10);  // the disk fills 64 KiB into the write
    EXPECT_THROW(write_file_atomic(p, big), Error);
    AtomicFile f(p);
    f.write(big.data(), 32 << 10);  // fits
    EXPECT_THROW(f.write(big.data(), 64 << 10), Error);
  }
  expect_only(d, "model.bin", "old contents");
}

TEST(AtomicFile, CommitChecksTheSize) {
  Dir d;
  const std::string p = d / "x";
  {
    AtomicFile f(p);
    f.write("abc", 3);
    EXPECT_THROW(f.commit(4), Error);
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(d.names().empty());
}

TEST(AtomicFile, AResumedTempIsKeptUntilCommittedOrDiscarded) {
  Dir d;
  const std::string p = d / "shard", part = d / "shard.part";
  {
    AtomicFile f(p, {.temp = part, .resume = true});
    f.write("first half ", 11);
  }  // interrupted: the part stays for the next run
  EXPECT_EQ(read_all(part), "first half ");
  EXPECT_FALSE(fs::exists(p));
  {
    AtomicFile f(p, {.temp = part, .resume = true});
    EXPECT_EQ(f.size(), 11u);  // not truncated
    f.write_at("second", 6, 11);
    f.commit(17);
  }
  expect_only(d, "shard", "first half second");
  {
    AtomicFile f(p, {.temp = part, .resume = true});
    f.write("bad", 3);
    f.discard();  // e.g. a hash mismatch
  }
  expect_only(d, "shard", "first half second");
}

TEST(AtomicFile, ExclusiveRefusesATempInUse) {
  Dir d;
  const std::string p = d / "e";
  AtomicFile a(p, {.temp = d / "e.tmp-1", .exclusive = true});
  EXPECT_THROW(AtomicFile(p, {.temp = d / "e.tmp-1", .exclusive = true}), Error);
}

TEST(AtomicFile, DirectWritesFallBackWhereRefused) {
  Dir d;
  const std::string p = d / "direct";
  {
    AtomicFile f(p, {.temp = {}, .direct = true});
    alignas(4096) static uint8_t block[4096];
    for (size_t i = 0; i < sizeof block; i++) block[i] = uint8_t(i * 7);
    f.write(block, sizeof block);
    f.truncate(100);
    f.commit(100);
  }
  EXPECT_EQ(fs::file_size(p), 100u);
  EXPECT_EQ(uint8_t(read_all(p)[99]), uint8_t(99 * 7));
}

TEST(AtomicFile, ParentDir) {
  EXPECT_EQ(parent_dir("a/b/c"), "a/b");
  EXPECT_EQ(parent_dir("c"), ".");
  EXPECT_EQ(parent_dir("/c"), "/");
}

}  // namespace
}  // namespace sluice
