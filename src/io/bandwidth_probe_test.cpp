#include "io/bandwidth_probe.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/page_cache.h"
#include "io/test_util.h"

namespace sluice {
namespace {

TEST(BandwidthProbe, ReadsTheBudgetInWholeSpansAndLeavesNoPagesCached) {
  testing::ScratchDir dir;
  auto a = dir.write("a.bin", testing::pattern_bytes(6 << 20, 1));
  auto b = dir.write("b.bin", testing::pattern_bytes(3 << 20, 2));
  auto tiny = dir.write("tiny.bin", testing::pattern_bytes(1000, 3));  // too short: skipped
  drop_cached_pages(a);
  drop_cached_pages(b);
  ProbeOptions o;
  o.read_bytes = 1000000;  // rounded up to 1003520
  o.budget_bytes = 20 << 20;
  o.max_seconds = 30;
  o.reader.queue_depth = 4;
  o.reader.chunk_bytes = 256 << 10;
  ProbeResult r = measure_read_ceiling({a, b, tiny}, o);
  EXPECT_EQ(r.bytes % 1003520, 0u);
  EXPECT_EQ(r.reads, r.bytes / 1003520);
  EXPECT_GE(r.bytes, uint64_t(20 << 20));
  EXPECT_GT(r.gbps, 0.0);
  EXPECT_GT(r.seconds, 0.0);
  EXPECT_EQ(r.queue_depth, 4);
  EXPECT_EQ(r.io_uring, testing::uring_expected(true));
  EXPECT_EQ(resident_pages(a) + resident_pages(b), 0u);

  // The time limit stops it too.
  o.budget_bytes = 1ull << 40;
  o.max_seconds = 0.05;
  r = measure_read_ceiling({a, b}, o);
  EXPECT_LT(r.seconds, 5.0);
}

TEST(BandwidthProbe, WriteProbeFileMakesAFileOfTheSize) {
  testing::ScratchDir dir;
  std::string p = dir.path + "/probe.bin";
  write_probe_file(p, (5 << 20) + 123);
  SpanReader reader({p});
  EXPECT_EQ(reader.file_size(0), uint64_t(5 << 20) + 123);
  Completed c = reader.wait(reader.submit(0, (5 << 20) - 1000, 1123));
  int nonzero = 0;
  for (int i = 0; i < 1123; i++) nonzero += c.data[i] != 0;
  EXPECT_GT(nonzero, 1000);  // random bytes, not a hole
}

TEST(BandwidthProbe, NoFileLongEnoughIsAnError) {
  testing::ScratchDir dir;
  auto tiny = dir.write("tiny.bin", testing::pattern_bytes(1000, 3));
  ProbeOptions o;
  o.read_bytes = 1 << 20;
  EXPECT_THROW(measure_read_ceiling({tiny}, o), Error);
  EXPECT_THROW(measure_read_ceiling({}, o), Error);
}

}  // namespace
}  // namespace sluice
