#include "hub/span_cache.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "hub/sha256.h"

namespace sluice {
namespace {

std::string fresh_dir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/sluice_span_cache_" + name + "_" + std::to_string(getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

std::vector<uint8_t> span_bytes(int seed, size_t n = 1000) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = uint8_t(i * 31 + size_t(seed) * 7);
  return v;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr)
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  if (d) closedir(d);
  return out;
}

void flip_byte(const std::string& path, long at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x40);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(SpanCache, StoresAndReadsBackByChecksumName) {
  const std::string dir = fresh_dir("roundtrip");
  SpanCache c(dir, 0);
  auto a = span_bytes(1);
  std::vector<uint8_t> got(a.size());
  EXPECT_FALSE(c.read(3, 7, a.size(), got.data()));
  c.store(3, 7, a.data(), a.size());
  ASSERT_TRUE(c.read(3, 7, a.size(), got.data()));
  EXPECT_EQ(got, a);
  auto names = files_in(dir);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], span_cache_name(3, 7, sha256_hex(a.data(), a.size())));
  EXPECT_EQ(names[0].substr(0, 6), "l3-e7.");
  SpanCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.bytes, a.size());
  // A new process sees the entry.
  SpanCache again(dir, 0);
  std::fill(got.begin(), got.end(), 0);
  ASSERT_TRUE(again.read(3, 7, a.size(), got.data()));
  EXPECT_EQ(got, a);
}

TEST(SpanCache, CorruptOrWrongSizeEntriesAreDeletedNotServed) {
  const std::string dir = fresh_dir("corrupt");
  SpanCache c(dir, 0);
  auto a = span_bytes(2);
  c.store(1, 1, a.data(), a.size());
  const std::string path = dir + "/" + files_in(dir)[0];
  flip_byte(path, 500);
  std::vector<uint8_t> got(a.size());
  EXPECT_FALSE(c.read(1, 1, a.size(), got.data()));
  EXPECT_EQ(c.stats().corrupt, 1u);
  EXPECT_TRUE(files_in(dir).empty());
  c.store(1, 1, a.data(), a.size());
  EXPECT_FALSE(c.read(1, 1, a.size() + 1, got.data()));  // the span is longer than the entry
  EXPECT_TRUE(files_in(dir).empty());
}

TEST(SpanCache, EvictsLeastRecentlyUsedWithinTheBound) {
  const std::string dir = fresh_dir("lru");
  SpanCache c(dir, 3000);  // three 1000-byte spans
  std::vector<uint8_t> got(1000);
  for (int e = 0; e < 3; e++) c.store(0, e, span_bytes(e).data(), 1000);
  ASSERT_TRUE(c.read(0, 0, 1000, got.data()));  // 0 is now the most recent; 1 the least
  c.store(0, 3, span_bytes(3).data(), 1000);
  EXPECT_FALSE(c.read(0, 1, 1000, got.data()));
  EXPECT_TRUE(c.read(0, 0, 1000, got.data()));
  EXPECT_TRUE(c.read(0, 2, 1000, got.data()));
  EXPECT_TRUE(c.read(0, 3, 1000, got.data()));
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(c.stats().bytes, 3000u);
  EXPECT_EQ(files_in(dir).size(), 3u);
  // A span larger than the whole bound is served but never stored.
  std::vector<uint8_t> big(4000, 1);
  c.store(0, 9, big.data(), big.size());
  EXPECT_EQ(files_in(dir).size(), 3u);
}

TEST(SpanCache, ReopeningKeepsRecencyAndAppliesTheBound) {
  const std::string dir = fresh_dir("reopen");
  {
    SpanCache c(dir, 0);
    for (int e = 0; e < 4; e++) {
      c.store(2, e, span_bytes(e).data(), 1000);
      usleep(20000);  // distinct mtimes
    }
    std::vector<uint8_t> got(1000);
    usleep(20000);
    ASSERT_TRUE(c.read(2, 0, 1000, got.data()));  // touched: now the newest
  }
  SpanCache small(dir, 2000);
  std::vector<uint8_t> got(1000);
  EXPECT_TRUE(small.read(2, 0, 1000, got.data()));
  EXPECT_TRUE(small.read(2, 3, 1000, got.data()));
  EXPECT_FALSE(small.read(2, 1, 1000, got.data()));
  EXPECT_FALSE(small.read(2, 2, 1000, got.data()));
}

TEST(SpanCache, RemovesTempFilesOfDeadWriters) {
  const std::string dir = fresh_dir("temps");
  mkdir(dir.c_str(), 0755);
  // pid 1 is alive (init); a huge pid is not.
  const std::string dead = dir + "/" + span_cache_name(0, 0, std::string(64, 'a')) + ".tmp-999999999-0";
  const std::string live = dir + "/" + span_cache_name(0, 1, std::string(64, 'b')) + ".tmp-1-0";
  std::ofstream(dead) << "x";
  std::ofstream(live) << "x";
  SpanCache c(dir, 0);
  EXPECT_NE(access(dead.c_str(), F_OK), 0);
  EXPECT_EQ(access(live.c_str(), F_OK), 0);
  EXPECT_EQ(c.stats().entries, 0u);
}

TEST(SpanCache, CheckFindsAndRepairsBadEntries) {
  const std::string dir = fresh_dir("check");
  {
    SpanCache c(dir, 0);
    c.store(0, 0, span_bytes(0).data(), 1000);
    c.store(0, 1, span_bytes(1).data(), 1000);
    c.store(0, 2, span_bytes(2).data(), 1000);
    c.store(5, 0, span_bytes(3).data(), 1000);   // no such layer
    c.store(0, 3, span_bytes(4).data(), 999);    // wrong size
  }
  flip_byte(dir + "/" + span_cache_name(0, 1, sha256_hex(span_bytes(1).data(), 1000)), 3);
  std::ofstream(dir + "/notes.txt") << "not ours";
  auto expected = [](int layer, int) -> int64_t { return layer == 0 ? 1000 : -1; };
  auto checks = check_span_cache(dir, expected, false);
  int bad = 0;
  for (const auto& c : checks) bad += !c.problem.empty();
  EXPECT_EQ(checks.size(), 6u);
  EXPECT_EQ(bad, 4);  // the flipped entry, layer 5, the short one, notes.txt
  check_span_cache(dir, expected, true);
  auto after = check_span_cache(dir, expected, false);
  ASSERT_EQ(after.size(), 3u);  // two good entries and the foreign file, left alone
  for (const auto& c : after) EXPECT_EQ(c.problem.empty(), c.path.find("notes.txt") == std::string::npos);
}

TEST(SpanCache, NameParsing) {
  int l, e;
  std::string sha;
  EXPECT_TRUE(parse_span_cache_name("l12-e345." + std::string(64, 'f'), &l, &e, &sha));
  EXPECT_EQ(l, 12);
  EXPECT_EQ(e, 345);
  EXPECT_FALSE(parse_span_cache_name("l12-e345." + std::string(63, 'f'), &l, &e, &sha));
  EXPECT_FALSE(parse_span_cache_name("l012-e345." + std::string(64, 'f'), &l, &e, &sha));
  EXPECT_FALSE(parse_span_cache_name("l1-e2." + std::string(64, 'f') + ".tmp-5-0", &l, &e, &sha));
}

}  // namespace
}  // namespace sluice
