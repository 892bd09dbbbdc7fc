// Prefetch (k3/model.cpp lookahead + io/expert_source.cpp guesses): guesses
// read into cache slots or spare buffers never change a result, and every
// guess read is accounted for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/session_test_util.h"
#include "k3/model.h"

namespace sluice {
namespace {

const std::string kTiny = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

TEST(Prefetch, EveryGuessIsUsedWithdrawnOrWastedAndLogitsDoNotMove) {
  std::vector<int> toks;
  for (int i = 0; i < 24; i++) toks.push_back((i * 53 + 7) % 448);
  ModelOptions pread;
  pread.pread_experts = true;
  auto base = open_model(kTiny, pread);
  const std::vector<float> want = run_all(*base, toks, true);
  // No cache slot (guesses go to spare buffers), a few slots, everything cached.
  for (uint64_t budget : {uint64_t(2) << 20, uint64_t(3) << 20, uint64_t(64) << 20}) {
    SCOPED_TRACE(budget);
    ModelOptions o;
    o.ram_budget = budget;
    auto m = open_model(kTiny, o);
    EXPECT_EQ(run_all(*m, toks, true), want);
    const ExpertStats s = m->experts->stats();
    // Every guess is resolved by the fetch of its layer (used, withdrawn or
    // written off) but the last pass's guess for the next token's first MoE
    // layer (this token's route there: at most top-k experts).
    const uint64_t resolved = s.prefetch_used + s.prefetch_cancelled + s.prefetch_wasted;
    EXPECT_LE(resolved, s.prefetched);
    EXPECT_LE(s.prefetched - resolved, uint64_t(m->config().num_experts_per_token));
    const Prefetcher& p = m->prefetcher;
    EXPECT_GT(p.recall(), 0.0);
    EXPECT_LE(p.recall(), 1.0);
    EXPECT_GT(p.precision(), 0.0);
    EXPECT_LE(p.precision(), 1.0);
    if (budget == (uint64_t(2) << 20)) {
      EXPECT_GT(s.prefetched, 0u);  // read into spare buffers: the cache has no slot
      EXPECT_GT(s.prefetch_used, 0u);
    }
  }
}

}  // namespace
}  // namespace sluice
