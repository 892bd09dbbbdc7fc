// io/expert_cache.h — the RAM cache of routed experts, within a byte budget.
//
// The budget is cut into fixed-size slots, one expert span each (size slots
// with SpanReader::direct_capacity(span) and read straight into slot_buffer():
// no copies). The cache maps (layer, expert) to a slot, picks victims, keeps
// pinned slots (experts the current layer is computing with, or reads in
// flight) out of reach of eviction, and counts hits and misses.
//
// Policies:
//  - lru:  evict the least recently used unpinned slot; admit every miss.
//  - heat: "learned heat" per (layer, expert), kept for every expert, cached
//          or not: how often it was routed to, each use decaying by half every
//          half_life_tokens. The slots are split into a recency window and a
//          main segment (the shape of W-TinyLFU): every miss enters the window
//          (LRU); when the window overflows, its oldest entry may only enter
//          the main segment by displacing a colder expert there, so a burst of
//          one-off experts cannot flush the hot set (LRU's failure mode on MoE
//          routing). The window holds one token's experts (all layers) when
//          the budget has room for more than that, so an expert the next token
//          reuses still hits; on smaller budgets it is tiny and heat alone
//          decides (LRU gets ~nothing there: every expert is evicted before
//          the next token comes back to its layer). Heat uses forward decay
//          (log2 of heat x 2^(t/half_life)), so stored keys never need
//          rescaling and stay ordered in a set.

// simulate_cache() replays a routing trace (token -> layer -> top-k experts)
// through the same class, without allocating slot memory: the engine can feed
// its real traces to compare policies and budgets.
//
// Not thread safe: the engine's I/O thread owns it.
#pragma once
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "io/aligned_buffer.h"

namespace sluice {

enum class CachePolicy { lru, heat };

struct ExpertCacheOptions {
  uint64_t budget_bytes = 0;
  uint64_t slot_bytes = 0;     // bytes per slot, > 0
  int layers = 0;              // layer ids are 0..layers-1
  int experts_per_layer = 0;   // expert ids are 0..experts_per_layer-1
  CachePolicy policy = CachePolicy::heat;
  double half_life_tokens = 32;  // heat: after this many tokens a use counts half
  int lookups_per_token = 0;     // experts one token routes to, all layers (K3: 92 x 16)
  int window_slots = -1;         // heat: recency window size; -1: the rule above
};

struct CacheStats {
  uint64_t hits = 0, misses = 0;
  uint64_t inserts = 0, evictions = 0;
  uint64_t bypasses = 0;   // misses that got no slot (all pinned, or too cold to cache)
  uint64_t bytes_hit = 0;  // slot_bytes per hit: reads avoided
  double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0; }
};

class ExpertCache {
 public:
  explicit ExpertCache(const ExpertCacheOptions& options);

  int slot_count() const { return int(slots_.size()); }
  uint64_t slot_bytes() const { return opt_.slot_bytes; }
  const ExpertCacheOptions& options() const { return opt_; }

  // Advances the clock heat decays by: once per decoded token (or per prefill chunk).
  void next_token() { token_++; }

  // The slot holding (layer, expert), or -1. Counts a hit or a miss and feeds
  // the policy. A hit may be a slot whose read is still in flight (!ready).
  int lookup(int layer, int expert);
  // The slot holding (layer, expert) or -1, without counting or touching the policy.
  int find(int layer, int expert) const;

  // Claims a slot for (layer, expert), which must not be cached: a free one,
  // else the policy's victim (evicted). Returns the slot pinned once and not
  // ready (read into slot_buffer(), then set_ready()), or -1 when every slot
  // is pinned or (heat) the expert is colder than every evictable one: read
  // it into scratch memory then.
  int insert(int layer, int expert);

  // Only slots with index < n are handed out free (insert() evicts instead
  // once those are taken): the engine faults slot memory in on a helper
  // thread in index order and lets the cache use what is ready, so no read
  // lands on fresh pages that the kernel must zero on the submitting thread.
  // Default: every slot.
  void limit_free_slots(int n) { usable_slots_ = n; }

  // The slot's memory: 4096-aligned, slot_bytes long; allocated on first use.
  std::span<uint8_t> slot_buffer(int slot);
  // Marks the read into the slot done; `data` is where the span starts.
  void set_ready(int slot, const uint8_t* data);
  bool ready(int slot) const { return slots_.at(size_t(slot)).ready; }
  const uint8_t* data(int slot) const { return slots_.at(size_t(slot)).data; }
  // (layer, expert) held by a slot; (-1, -1) if free.
  std::pair<int, int> key_of(int slot) const;

  // Pinned slots are never evicted. Pins nest; each pin needs one unpin.
  void pin(int slot);
  void unpin(int slot);
  int pins(int slot) const { return slots_.at(size_t(slot)).pins; }

  // Frees a slot whatever it holds (e.g. its read failed); pins are dropped.
  void erase(int slot);

  // Current heat of (layer, expert): decayed use count (both policies track it).
  double heat(int layer, int expert) const;

  const CacheStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Verifies internal consistency (map <-> slots, eviction order, pins); throws
  // sluice::Error describing the first broken invariant. For tests.
  void check_invariants() const;

 private:
  struct Slot {
    int key = -1;  // layer * experts_per_layer + expert, or -1 when free
    int pins = 0;
    bool ready = false;
    bool in_window = true;  // heat: recency window (else main segment)
    const uint8_t* data = nullptr;
    double priority = 0;  // position in its eviction set (lower goes first)
    AlignedBuffer memory;
  };
  using EvictionSet = std::set<std::pair<double, int>>;  // (priority, slot), unpinned only

  int key(int layer, int expert) const;
  double priority_of(const Slot& s) const;
  EvictionSet& set_of(const Slot& s) { return s.in_window ? window_ : main_; }
  void touch(int key);
  void make_evictable(int slot);
  void make_unevictable(int slot);
  int pop_victim(EvictionSet& set);  // evicts the set's first slot; returns it
  void move_to(int slot, bool window);

  ExpertCacheOptions opt_;
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;
  std::vector<int> slot_of_;        // per key: slot or -1
  std::vector<double> heat_log2_;   // per key: log2(heat) + t/half_life at any t
  std::vector<uint64_t> last_use_;  // per key: access counter of the latest lookup
  EvictionSet window_, main_;
  size_t window_target_ = 0;  // slots the window may hold before it spills
  size_t window_count_ = 0;   // cached slots in the window, pinned or not
  int usable_slots_ = std::numeric_limits<int>::max();  // limit_free_slots()
  uint64_t token_ = 0;
  uint64_t accesses_ = 0;
  CacheStats stats_;
};

// A routing trace: for each token, for each layer, the top_k experts chosen.
struct RoutingTrace {
  int layers = 0, experts_per_layer = 0, top_k = 0;
  std::vector<int32_t> experts;  // [token][layer][k]
  size_t tokens() const {
    return layers && top_k ? experts.size() / (size_t(layers) * size_t(top_k)) : 0;
  }
};

struct CacheSimResult {
  CacheStats stats;
  int slots = 0;
};

// Replays `trace` through an ExpertCache made from `options` (its layers and
// experts_per_layer are taken from the trace): per token and layer, look up
// each chosen expert, insert the misses, pin the layer's experts while it
// "computes", unpin; next_token() after each token. No slot memory is used.
CacheSimResult simulate_cache(const RoutingTrace& trace, ExpertCacheOptions options);

// Synthetic routing with the properties real MoE routing is believed to have:
// per-layer Zipf-like popularity over a random permutation of experts, slow
// drift of that popularity, and temporal correlation (a token often reuses the
// experts the previous token chose in the same layer).
struct SyntheticTraceOptions {
  int layers = 8, experts_per_layer = 256, top_k = 8;
  int tokens = 2000;
  double zipf_exponent = 0.9;     // popularity of rank r ~ 1/(r+1)^s
  double reuse = 0.3;             // chance each choice repeats one of the previous token's
  double drift_per_token = 0.05;  // expected popularity swaps per layer per token
  uint64_t seed = 1;
};
RoutingTrace synthetic_routing_trace(const SyntheticTraceOptions& options);

}  // namespace sluice
