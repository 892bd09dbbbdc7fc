#include "io/expert_source.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace sluice {
namespace {

// Hands out pread bytes and counts the experts it was asked for.
class CountingSource : public ExpertSource {
 public:
  CountingSource(const Checkpoint& ck, int* asked) : inner_(make_pread_expert_source(ck)), asked_(asked) {}
  void fetch(int layer, std::span<const int> experts,
             const std::function<void(size_t, const uint8_t*)>& use) override {
    *asked_ += int(experts.size());
    inner_->fetch(layer, experts, use);
  }

 private:
  std::unique_ptr<ExpertSource> inner_;
  int* asked_;
};

std::vector<std::vector<uint8_t>> fetch_all(ExpertSource& s, const Checkpoint& ck, int layer,
                                            const std::vector<int>& experts) {
  std::vector<std::vector<uint8_t>> out(experts.size());
  const uint64_t n = ck.config.expert_span_bytes();
  s.fetch(layer, experts, [&](size_t i, const uint8_t* p) { out[i].assign(p, p + n); });
  return out;
}

// A stream install's source: the RAM cache in front, the filler asked only
// for misses, and what it returns cached; bytes identical to a plain read.
TEST(ExpertSource, MissFillerIsAskedOnlyForWhatTheCacheLacks) {
  const Checkpoint ck = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  const int layer = ck.config.first_k_dense_replace;
  const std::vector<int> first = {0, 3, 5}, second = {5, 1, 0};
  auto plain = make_pread_expert_source(ck);
  int asked = 0;
  DirectSourceOptions d;
  d.cache_bytes = 64ull << 20;
  d.inflight_bytes = 1ull << 20;
  auto stacked = make_direct_expert_source(ck, d, std::make_unique<CountingSource>(ck, &asked));
  ASSERT_NE(stacked->miss_filler(), nullptr);
  EXPECT_EQ(fetch_all(*stacked, ck, layer, first), fetch_all(*plain, ck, layer, first));
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(fetch_all(*stacked, ck, layer, second), fetch_all(*plain, ck, layer, second));
  EXPECT_EQ(asked, 4);  // only expert 1 was not cached
  const ExpertStats s = stacked->stats();
  EXPECT_EQ(s.fetched, 6u);
  EXPECT_EQ(s.cache_hits, 2u);
  EXPECT_EQ(s.bytes_read, 0u);  // nothing read from the (holed) shards
}

}  // namespace
}  // namespace sluice
