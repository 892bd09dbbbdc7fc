// io/expert_cache.cpp — slots, eviction order, heat; trace replay and synthesis.
#include "io/expert_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/error.h"
#include "base/splitmix.h"

namespace sluice {

namespace {

constexpr double kCold = -std::numeric_limits<double>::infinity();

// log2(2^a + 2^b) without overflow.
double log2_add(double a, double b) {
  if (a == kCold) return b;
  if (b == kCold) return a;
  double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log2(1.0 + std::exp2(lo - hi));
}

[[noreturn]] void cache_fail(const std::string& what) { fail("expert cache", what); }

}  // namespace

ExpertCache::ExpertCache(const ExpertCacheOptions& options) : opt_(options) {
  if (opt_.slot_bytes == 0) cache_fail("slot_bytes must be positive");
  if (opt_.layers <= 0 || opt_.experts_per_layer <= 0)
    cache_fail("layers and experts_per_layer must be positive");
  if (int64_t(opt_.layers) * opt_.experts_per_layer > std::numeric_limits<int>::max())
    cache_fail("too many experts");
  if (!(opt_.half_life_tokens > 0)) cache_fail("half_life_tokens must be positive");
  if (opt_.lookups_per_token < 0) cache_fail("lookups_per_token must not be negative");
  // More slots than experts would never fill: a budget of 1T on a small model
  // must not size bookkeeping for 60 million slots.
  size_t n = size_t(std::min<uint64_t>(opt_.budget_bytes / opt_.slot_bytes,
                                       uint64_t(opt_.layers) * uint64_t(opt_.experts_per_layer)));
  slots_.resize(n);
  for (size_t i = n; i-- > 0;) free_slots_.push_back(int(i));
  size_t per_token = size_t(opt_.lookups_per_token);
  if (opt_.policy == CachePolicy::lru)
    window_target_ = n;
  else if (opt_.window_slots >= 0)
    window_target_ = std::max<size_t>(1, size_t(opt_.window_slots));
  else if (per_token > 0 && n > per_token)
    window_target_ = per_token;
  else
    window_target_ = std::max<size_t>(1, n / 100);
  size_t keys = size_t(opt_.layers) * size_t(opt_.experts_per_layer);
  slot_of_.assign(keys, -1);
  heat_log2_.assign(keys, kCold);
  last_use_.assign(keys, 0);
}

int ExpertCache::key(int layer, int expert) const {
  if (layer < 0 || layer >= opt_.layers || expert < 0 || expert >= opt_.experts_per_layer)
    cache_fail("no expert " + std::to_string(expert) + " in layer " + std::to_string(layer) +
               " (cache holds " + std::to_string(opt_.layers) + " layers x " +
               std::to_string(opt_.experts_per_layer) + " experts)");
  return layer * opt_.experts_per_layer + expert;
}

double ExpertCache::priority_of(const Slot& s) const {
  if (s.in_window) return double(last_use_[size_t(s.key)]);
  return heat_log2_[size_t(s.key)];
}

void ExpertCache::make_evictable(int slot) {
  Slot& s = slots_[size_t(slot)];
  s.priority = priority_of(s);
  set_of(s).insert({s.priority, slot});
}

void ExpertCache::make_unevictable(int slot) {
  Slot& s = slots_[size_t(slot)];
  set_of(s).erase({s.priority, slot});
}

int ExpertCache::pop_victim(EvictionSet& set) {
  int v = set.begin()->second;
  set.erase(set.begin());
  Slot& s = slots_[size_t(v)];
  slot_of_[size_t(s.key)] = -1;
  if (s.in_window) window_count_--;
  s.key = -1;
  s.ready = false;
  s.data = nullptr;
  stats_.evictions++;
  return v;  // keeps its memory for the next expert
}

void ExpertCache::move_to(int slot, bool window) {
  Slot& s = slots_[size_t(slot)];
  if (s.in_window == window) return;
  if (s.pins == 0) make_unevictable(slot);
  s.in_window = window;
  window_count_ += window ? 1 : size_t(-1);
  if (s.pins == 0) make_evictable(slot);
}

void ExpertCache::touch(int k) {
  last_use_[size_t(k)] = ++accesses_;
  heat_log2_[size_t(k)] =
      log2_add(heat_log2_[size_t(k)], double(token_) / opt_.half_life_tokens);
  int slot = slot_of_[size_t(k)];
  if (slot >= 0 && slots_[size_t(slot)].pins == 0) {  // re-sort under its new priority
    make_unevictable(slot);
    make_evictable(slot);
  }
}

int ExpertCache::lookup(int layer, int expert) {
  int k = key(layer, expert);
  touch(k);
  int slot = slot_of_[size_t(k)];
  if (slot >= 0) {
    stats_.hits++;
    stats_.bytes_hit += opt_.slot_bytes;
  } else {
    stats_.misses++;
  }
  return slot;
}

int ExpertCache::find(int layer, int expert) const { return slot_of_[size_t(key(layer, expert))]; }

int ExpertCache::insert(int layer, int expert) {
  int k = key(layer, expert);
  if (slot_of_[size_t(k)] >= 0)
    cache_fail("insert: expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
               " is already cached");
  // A window that grew past its target while its entries were pinned spills
  // its oldest into the main segment first (they were just in use).
  while (window_count_ > window_target_ && !window_.empty()) move_to(window_.begin()->second, false);
  int slot = -1;
  // Free slots are taken lowest index first (erase() returns only slots that
  // were handed out), so the back is below the limit whenever any free one is.
  if (!free_slots_.empty() && free_slots_.back() < usable_slots_) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  if (window_count_ >= window_target_) {
    if (!window_.empty()) {
      // The window is full: its oldest unpinned entry leaves it, into the main
      // segment if there is room or if it is hotter than main's coldest.
      int oldest = window_.begin()->second;
      double oldest_heat = heat_log2_[size_t(slots_[size_t(oldest)].key)];
      if (slot >= 0) {
        move_to(oldest, false);
      } else if (!main_.empty() && oldest_heat > main_.begin()->first) {
        slot = pop_victim(main_);
        move_to(oldest, false);
      } else {
        slot = pop_victim(window_);
      }
    } else if (slot < 0 && !main_.empty() && heat_log2_[size_t(k)] > main_.begin()->first) {
      // The whole window is pinned: the newcomer itself must beat main's coldest.
      slot = pop_victim(main_);
    }
  } else if (slot < 0 && !main_.empty()) {
    slot = pop_victim(main_);  // the window grows back to its target
  }
  if (slot < 0) {  // every slot pinned, or the newcomer is colder than anything evictable
    stats_.bypasses++;
    return -1;
  }
  Slot& s = slots_[size_t(slot)];
  s.key = k;
  s.pins = 1;
  s.ready = false;
  s.data = nullptr;
  s.in_window = true;
  window_count_++;
  slot_of_[size_t(k)] = slot;
  stats_.inserts++;
  return slot;
}

std::span<uint8_t> ExpertCache::slot_buffer(int slot) {
  Slot& s = slots_.at(size_t(slot));
  if (s.memory.empty()) s.memory = AlignedBuffer(opt_.slot_bytes);
  return s.memory.bytes();
}

void ExpertCache::set_ready(int slot, const uint8_t* data) {
  Slot& s = slots_.at(size_t(slot));
  if (s.key < 0) cache_fail("set_ready: slot " + std::to_string(slot) + " is free");
  s.ready = true;
  s.data = data;
}

std::pair<int, int> ExpertCache::key_of(int slot) const {
  int k = slots_.at(size_t(slot)).key;
  if (k < 0) return {-1, -1};
  return {k / opt_.experts_per_layer, k % opt_.experts_per_layer};
}

void ExpertCache::pin(int slot) {
  Slot& s = slots_.at(size_t(slot));
  if (s.key < 0) cache_fail("pin: slot " + std::to_string(slot) + " is free");
  if (s.pins++ == 0) make_unevictable(slot);
}

void ExpertCache::unpin(int slot) {
  Slot& s = slots_.at(size_t(slot));
  if (s.key < 0 || s.pins <= 0) cache_fail("unpin: slot " + std::to_string(slot) + " is not pinned");
  if (--s.pins == 0) make_evictable(slot);
}

void ExpertCache::erase(int slot) {
  Slot& s = slots_.at(size_t(slot));
  if (s.key < 0) return;
  if (s.pins == 0) make_unevictable(slot);
  if (s.in_window) window_count_--;
  slot_of_[size_t(s.key)] = -1;
  s.key = -1;
  s.pins = 0;
  s.ready = false;
  s.data = nullptr;
  free_slots_.push_back(slot);
}

double ExpertCache::heat(int layer, int expert) const {
  double h = heat_log2_[size_t(key(layer, expert))];
  return h == kCold ? 0.0 : std::exp2(h - double(token_) / opt_.half_life_tokens);
}

void ExpertCache::check_invariants() const {
  size_t cached = 0, unpinned = 0, in_window = 0;
  for (size_t i = 0; i < slots_.size(); i++) {
    const Slot& s = slots_[i];
    std::string at = "slot " + std::to_string(i) + ": ";
    if (s.key < 0) {
      if (s.pins != 0 || s.ready) cache_fail(at + "free but pinned or ready");
      continue;
    }
    cached++;
    in_window += s.in_window;
    if (slot_of_[size_t(s.key)] != int(i)) cache_fail(at + "key does not map back to it");
    if (s.pins < 0) cache_fail(at + "negative pin count");
    if (opt_.policy == CachePolicy::lru && !s.in_window) cache_fail(at + "lru slot outside the window");
    const EvictionSet& own = s.in_window ? window_ : main_;
    const EvictionSet& other = s.in_window ? main_ : window_;
    if (other.count({s.priority, int(i)})) cache_fail(at + "in the wrong eviction set");
    if (s.pins == 0) {
      unpinned++;
      if (!own.count({s.priority, int(i)})) cache_fail(at + "unpinned but not evictable");
      if (s.priority != priority_of(s)) cache_fail(at + "stale eviction priority");
    } else if (own.count({s.priority, int(i)})) {
      cache_fail(at + "pinned but evictable");
    }
  }
  if (window_.size() + main_.size() != unpinned)
    cache_fail("eviction sets hold slots that are not cached");
  if (in_window != window_count_) cache_fail("window count is off");
  if (cached + free_slots_.size() != slots_.size()) cache_fail("free list and slots disagree");
  size_t mapped = 0;
  for (int s : slot_of_) mapped += s >= 0;
  if (mapped != cached) cache_fail("map holds keys of no slot");
}

CacheSimResult simulate_cache(const RoutingTrace& trace, ExpertCacheOptions options) {
  if (trace.layers <= 0 || trace.top_k <= 0 ||
      trace.experts.size() % (size_t(trace.layers) * size_t(trace.top_k)) != 0)
    fail("routing trace", "experts.size() is not tokens x layers x top_k");
  options.layers = trace.layers;
  options.experts_per_layer = trace.experts_per_layer;
  options.lookups_per_token = trace.layers * trace.top_k;
  ExpertCache cache(options);
  std::vector<int> pinned;
  const int32_t* e = trace.experts.data();
  for (size_t t = 0; t < trace.tokens(); t++) {
    for (int l = 0; l < trace.layers; l++) {
      pinned.clear();
      for (int k = 0; k < trace.top_k; k++, e++) {
        int s = cache.lookup(l, *e);
        if (s >= 0) {
          cache.pin(s);
        } else {
          s = cache.insert(l, *e);  // comes back pinned
          if (s < 0) continue;      // bypassed: read into scratch
          cache.set_ready(s, nullptr);
        }
        pinned.push_back(s);
      }
      for (int s : pinned) cache.unpin(s);  // the layer's compute is done
    }
    cache.next_token();
  }
  return {cache.stats(), cache.slot_count()};
}

RoutingTrace synthetic_routing_trace(const SyntheticTraceOptions& o) {
  if (o.layers <= 0 || o.experts_per_layer <= 0 || o.top_k <= 0 || o.top_k > o.experts_per_layer ||
      o.tokens < 0)
    fail("synthetic trace", "need layers, experts_per_layer >= top_k > 0 and tokens >= 0");
  uint64_t state = o.seed * 0x9E3779B97F4A7C15ull + 7;
  auto next = [&] { return splitmix64(state); };
  auto uniform = [&] { return double(next() >> 11) * 0x1.0p-53; };
  auto below = [&](int n) { return int(next() % uint64_t(n)); };

  const int E = o.experts_per_layer, K = o.top_k;
  std::vector<double> cdf(static_cast<size_t>(E));
  double sum = 0;
  for (int r = 0; r < E; r++) cdf[size_t(r)] = sum += std::pow(double(r + 1), -o.zipf_exponent);
  auto zipf_rank = [&] {
    double u = uniform() * sum;
    return int(std::min<size_t>(size_t(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin()),
                                size_t(E - 1)));
  };

  std::vector<std::vector<int>> perm(size_t(o.layers), std::vector<int>(size_t(E)));
  for (auto& p : perm) {
    for (int i = 0; i < E; i++) p[size_t(i)] = i;
    for (int i = E - 1; i > 0; i--) std::swap(p[size_t(i)], p[size_t(below(i + 1))]);
  }

  RoutingTrace tr;
  tr.layers = o.layers;
  tr.experts_per_layer = E;
  tr.top_k = K;
  tr.experts.reserve(size_t(o.tokens) * size_t(o.layers) * size_t(K));
  std::vector<int> chosen;
  std::vector<char> used(size_t(E), 0);
  for (int t = 0; t < o.tokens; t++) {
    for (int l = 0; l < o.layers; l++) {
      auto& p = perm[size_t(l)];
      double swaps = o.drift_per_token;
      while (swaps > 0) {  // popular ranks drift: swap one with a random rank
        if (swaps >= 1 || uniform() < swaps) std::swap(p[size_t(zipf_rank())], p[size_t(below(E))]);
        swaps -= 1;
      }
      const int32_t* prev = t > 0 ? &tr.experts[tr.experts.size() - size_t(o.layers * K)] : nullptr;
      chosen.clear();
      while (int(chosen.size()) < K) {
        int e;
        if (prev && uniform() < o.reuse)
          e = prev[below(K)];
        else
          e = p[size_t(zipf_rank())];
        for (int tries = 0; used[size_t(e)] && tries < 4; tries++) e = p[size_t(zipf_rank())];
        while (used[size_t(e)]) e = below(E);
        used[size_t(e)] = 1;
        chosen.push_back(e);
      }
      for (int e : chosen) {
        used[size_t(e)] = 0;
        tr.experts.push_back(e);
      }
    }
  }
  return tr;
}

}  // namespace sluice
