#include "io/expert_cache.h"

#include <cstdio>
#include <map>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/test_util.h"

namespace sluice {
namespace {

ExpertCacheOptions small_cache(int slots, CachePolicy p, int layers = 4, int experts = 16) {
  ExpertCacheOptions o;
  o.slot_bytes = 4096;
  o.budget_bytes = uint64_t(slots) * 4096 + 100;  // a partial slot does not count
  o.layers = layers;
  o.experts_per_layer = experts;
  o.policy = p;
  o.half_life_tokens = 16;
  return o;
}

TEST(ExpertCache, LookupInsertHitMissAndStats) {
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::heat}) {
    ExpertCache c(small_cache(3, p));
    EXPECT_EQ(c.slot_count(), 3);
    EXPECT_EQ(c.lookup(0, 5), -1);
    int s = c.insert(0, 5);
    ASSERT_GE(s, 0);
    EXPECT_EQ(c.pins(s), 1);
    EXPECT_FALSE(c.ready(s));
    auto buf = c.slot_buffer(s);
    EXPECT_EQ(buf.size(), 4096u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % kIoAlign, 0u);
    c.set_ready(s, buf.data() + 10);
    c.unpin(s);
    EXPECT_EQ(c.lookup(0, 5), s);
    EXPECT_TRUE(c.ready(s));
    EXPECT_EQ(c.data(s), buf.data() + 10);
    EXPECT_EQ(c.key_of(s), std::make_pair(0, 5));
    EXPECT_EQ(c.find(1, 5), -1);
    EXPECT_EQ(c.stats().hits, 1u);
    EXPECT_EQ(c.stats().misses, 1u);
    EXPECT_EQ(c.stats().bytes_hit, 4096u);
    EXPECT_THROW(c.insert(0, 5), Error);   // already cached
    EXPECT_THROW(c.lookup(4, 0), Error);   // no such layer
    EXPECT_THROW(c.lookup(0, 16), Error);  // no such expert
    c.check_invariants();
  }
}

TEST(ExpertCache, LruEvictsLeastRecentlyUsed) {
  ExpertCache c(small_cache(3, CachePolicy::lru));
  for (int e = 0; e < 3; e++) {
    c.lookup(0, e);
    c.unpin(c.insert(0, e));
  }
  c.lookup(0, 0);  // 1 is now the least recent
  c.lookup(0, 3);
  int s = c.insert(0, 3);
  ASSERT_GE(s, 0);
  EXPECT_EQ(c.find(0, 1), -1);
  EXPECT_GE(c.find(0, 0), 0);
  EXPECT_EQ(c.stats().evictions, 1u);
  c.check_invariants();
}

TEST(ExpertCache, PinnedSlotsAreNeverEvicted) {
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::heat}) {
    ExpertCache c(small_cache(2, p));
    c.lookup(0, 0);
    int a = c.insert(0, 0);
    c.lookup(0, 1);
    int b = c.insert(0, 1);
    c.lookup(0, 2);
    EXPECT_EQ(c.insert(0, 2), -1);  // both pinned (insert pins)
    EXPECT_EQ(c.stats().bypasses, 1u);
    c.pin(a);  // nested pin
    c.unpin(a);
    c.lookup(0, 2);
    EXPECT_EQ(c.insert(0, 2), -1);  // a still pinned once
    c.unpin(b);
    for (int i = 0; i < 3; i++) c.lookup(0, 2);  // make it hotter than b for heat
    int s = c.insert(0, 2);
    EXPECT_EQ(s, b);  // the only unpinned slot
    EXPECT_GE(c.find(0, 0), 0);
    c.unpin(b);  // insert's pin
    EXPECT_THROW(c.unpin(b), Error);
    c.check_invariants();
  }
}

// Random operations against a model of what the cache must hold.
TEST(ExpertCache, RandomOperationsKeepInvariants) {
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::heat}) {
    ExpertCache c(small_cache(10, p, 3, 12));
    testing::Rng rng(5);
    std::map<int, int> pins;  // slot -> pins we hold
    std::map<int, std::pair<int, int>> pinned_key;
    for (int step = 0; step < 20000; step++) {
      int layer = int(rng.below(3)), expert = int(rng.below(12));
      switch (rng.below(6)) {
        case 0:
        case 1: {
          int s = c.lookup(layer, expert);
          if (s < 0) {
            s = c.insert(layer, expert);  // pinned on success
          } else if (rng.below(2)) {
            c.pin(s);
          } else {
            break;
          }
          if (s >= 0) {
            pins[s]++;
            pinned_key[s] = {layer, expert};
          }
          break;
        }
        case 2:
        case 3:
          if (!pins.empty()) {
            auto it = pins.begin();
            std::advance(it, long(rng.below(pins.size())));
            c.unpin(it->first);
            if (--it->second == 0) pins.erase(it);
          }
          break;
        case 4:
          c.next_token();
          break;
        case 5:
          if (!pins.empty() && rng.below(20) == 0) {  // a failed read drops its slot
            int s = pins.begin()->first;
            c.erase(s);
            pins.erase(s);
          }
          break;
      }
      for (auto& [s, n] : pins) {  // pinned experts are still where they were
        ASSERT_EQ(c.key_of(s), pinned_key[s]);
        ASSERT_EQ(c.pins(s), n);
      }
      if (step % 97 == 0) c.check_invariants();
    }
    c.check_invariants();
    EXPECT_GT(c.stats().evictions, 100u);
  }
}

TEST(ExpertCache, HeatDecaysWithHalfLife) {
  ExpertCache c(small_cache(2, CachePolicy::heat));
  c.lookup(1, 1);
  c.lookup(1, 1);
  EXPECT_DOUBLE_EQ(c.heat(1, 1), 2.0);
  for (int i = 0; i < 16; i++) c.next_token();
  EXPECT_NEAR(c.heat(1, 1), 1.0, 1e-12);
  c.lookup(1, 1);
  EXPECT_NEAR(c.heat(1, 1), 2.0, 1e-12);
  EXPECT_EQ(c.heat(2, 2), 0.0);
}

// Layer 0 routes to the same 8 experts every token; layer 1 to 8 experts never
// seen again. With 12 slots LRU thrashes: each token's one-offs are more
// recent than the hot set, which is evicted before layer 0 comes back to it,
// so nothing ever hits. Heat keeps the hot set: every layer-0 lookup hits.
TEST(ExpertCache, HeatBeatsLruWhenOneOffExpertsFlood) {
  RoutingTrace tr;
  tr.layers = 2;
  tr.experts_per_layer = 10000;
  tr.top_k = 8;
  int next_cold = 0;
  for (int t = 0; t < 500; t++) {
    for (int e = 0; e < 8; e++) tr.experts.push_back(e);            // layer 0: hot
    for (int e = 0; e < 8; e++) tr.experts.push_back(next_cold++);  // layer 1: one-offs
  }
  ExpertCacheOptions o;
  o.slot_bytes = 1;
  o.budget_bytes = 12;
  o.policy = CachePolicy::lru;
  double lru = simulate_cache(tr, o).stats.hit_rate();
  o.policy = CachePolicy::heat;
  double heat = simulate_cache(tr, o).stats.hit_rate();
  EXPECT_LT(lru, 0.01);
  EXPECT_NEAR(heat, 0.50, 0.01);  // 8 of every 16 lookups
}

TEST(ExpertCache, SimulationCountsEveryLookup) {
  SyntheticTraceOptions so;
  so.tokens = 50;
  RoutingTrace tr = synthetic_routing_trace(so);
  ASSERT_EQ(tr.tokens(), 50u);
  ExpertCacheOptions o;
  o.slot_bytes = 1;
  o.budget_bytes = 100;
  CacheSimResult r = simulate_cache(tr, o);
  EXPECT_EQ(r.slots, 100);
  EXPECT_EQ(r.stats.hits + r.stats.misses, tr.experts.size());
  // Each token's experts in a layer are distinct and in range.
  for (size_t i = 0; i < tr.experts.size(); i += size_t(tr.top_k)) {
    std::map<int, int> seen;
    for (int k = 0; k < tr.top_k; k++) {
      int e = tr.experts[i + size_t(k)];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, tr.experts_per_layer);
      ASSERT_EQ(seen[e]++, 0);
    }
  }
  // Same options, same trace.
  EXPECT_EQ(synthetic_routing_trace(so).experts, tr.experts);
  tr.experts.pop_back();
  EXPECT_THROW(simulate_cache(tr, o), Error);
}

// The table in docs/storage.md: hit rates of LRU vs heat on skewed, drifting,
// temporally correlated synthetic routing at several budgets. Heat must not
// lose to LRU at any budget and must win clearly at the small ones.
TEST(ExpertCache, SyntheticRoutingHitRatesLruVsHeat) {
  SyntheticTraceOptions so;
  so.layers = 8;
  so.experts_per_layer = 384;
  so.top_k = 8;
  so.tokens = 2000;
  RoutingTrace tr = synthetic_routing_trace(so);
  const int total = so.layers * so.experts_per_layer;
  std::printf("  budget (%% of experts)   lru     heat\n");
  for (double frac : {0.01, 0.02, 0.05, 0.10, 0.20, 0.40}) {
    ExpertCacheOptions o;
    o.slot_bytes = 1;
    o.budget_bytes = uint64_t(frac * total);
    o.policy = CachePolicy::lru;
    double lru = simulate_cache(tr, o).stats.hit_rate();
    o.policy = CachePolicy::heat;
    double heat = simulate_cache(tr, o).stats.hit_rate();
    std::printf("  %5.0f%%                 %.3f   %.3f\n", frac * 100, lru, heat);
    EXPECT_GE(heat, lru - 0.005) << frac;
    if (frac <= 0.10) {
      EXPECT_GT(heat, lru + 0.02) << frac;
    }
  }
}

// A budget far above the model (--ram-budget 1T on a 36 MB model) sizes no
// more slots than there are experts (it used to allocate gigabytes of slot
// bookkeeping).
TEST(ExpertCache, SlotsNeverOutnumberExperts) {
  ExpertCacheOptions o;
  o.slot_bytes = 4096;
  o.budget_bytes = uint64_t(1) << 40;
  o.layers = 4;
  o.experts_per_layer = 8;
  ExpertCache c(o);
  EXPECT_EQ(c.slot_count(), 32);
  c.check_invariants();
}

// limit_free_slots(n): only slots below n are handed out free; past them a
// miss evicts (or bypasses) as if the cache were n slots, and raising the
// limit hands out the next ones, in index order, including after erases.
TEST(ExpertCache, LimitedFreeSlotsAreHandedOutInIndexOrder) {
  for (CachePolicy p : {CachePolicy::lru, CachePolicy::heat}) {
    ExpertCacheOptions o = small_cache(6, p);
    o.window_slots = 6;
    ExpertCache c(o);
    c.limit_free_slots(0);
    EXPECT_EQ(c.insert(0, 0), -1);  // nothing usable yet: the miss bypasses
    EXPECT_EQ(c.stats().bypasses, 1u);
    c.limit_free_slots(2);
    const int a = c.insert(0, 1), b = c.insert(0, 2);
    EXPECT_EQ(a, 0);
    EXPECT_EQ(b, 1);
    c.unpin(a);
    c.unpin(b);
    const int d = c.insert(0, 3);  // no free usable slot: LRU evicts, heat's window bypasses
    EXPECT_TRUE(d == -1 || d < 2) << d;
    if (d >= 0) c.unpin(d);
    c.erase(0);
    c.limit_free_slots(4);
    std::vector<int> got;
    for (int e = 4; e < 9; e++) {
      const int s = c.insert(1, e);
      if (s < 0) break;
      got.push_back(s);
      c.unpin(s);
      c.check_invariants();
    }
    ASSERT_GE(got.size(), 3u);
    EXPECT_EQ(got[0], 0);  // the erased slot first, then 2 and 3; never 4 or 5
    EXPECT_EQ(got[1], 2);
    EXPECT_EQ(got[2], 3);
    for (int s : got) EXPECT_LT(s, 4);
    c.limit_free_slots(6);
    EXPECT_EQ(c.insert(2, 0), 4);
    c.check_invariants();
  }
}

}  // namespace
}  // namespace sluice
