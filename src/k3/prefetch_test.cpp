// Prefetch (k3/model.cpp lookahead + io/expert_source.cpp guesses): guesses
// read into cache slots or spare buffers never change a result, and every
// guess read is accounted for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arch/open.h"
#include "engine/session_test_util.h"
#include "k3/k3_model.h"

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
  // Each discipline: no early guess in decode steps and the late estimate
  // withdrawing what it does not confirm (the default), every early guess and
  // every guess kept, every early guess and the late estimate withdrawing.
  struct Discipline {
    int early_per_row;
    bool replace;
  };
  for (const Discipline d : {Discipline{0, true}, Discipline{-1, false}, Discipline{-1, true}}) {
    for (uint64_t budget : {uint64_t(2) << 20, uint64_t(3) << 20, uint64_t(64) << 20}) {
      SCOPED_TRACE(std::to_string(budget) + " early " + std::to_string(d.early_per_row) + " replace " +
                   std::to_string(d.replace));
      ModelOptions o;
      o.ram_budget = budget;
      auto m = open_model(kTiny, o);
      k3_parts(*m).prefetcher.early_per_row = d.early_per_row;
      k3_parts(*m).prefetcher.replace = d.replace;
      EXPECT_EQ(run_all(*m, toks, true), want);
      const ExpertStats s = k3_parts(*m).experts->stats();
      if (!d.replace) {
        EXPECT_EQ(s.prefetch_withdrawn, 0u);
      }
      // Every guess is resolved by a better estimate or the fetch of its layer
      // (used, withdrawn, cut short or written off) but the last pass's guess
      // for the next token's first MoE layer (this token's route there: at most
      // top-k experts).
      const uint64_t resolved =
          s.prefetch_used + s.prefetch_cancelled + s.prefetch_withdrawn + s.prefetch_cut + s.prefetch_wasted;
      EXPECT_LE(resolved, s.prefetched);
      EXPECT_LE(s.prefetched - resolved, uint64_t(m->config().num_experts_per_token));
      const Prefetcher& p = k3_parts(*m).prefetcher;
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
}

}  // namespace
}  // namespace sluice
