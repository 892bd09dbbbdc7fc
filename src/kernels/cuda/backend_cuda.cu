// kernels/cuda/backend_cuda.cu — the CUDA entry of the op table
// (backend_cuda.h): weight mirrors, per-call uploads, the matrix products.
#include "kernels/cuda/backend_cuda.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/upload.h"
#include "kernels/split_share.h"
#include "kernels/dsa.h"
#include "kernels/kda_parts.h"
#include "kernels/ref.h"
#include "kernels/threads.h"

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr size_t kReserve = size_t(2) << 30;  // VRAM left free by the mirrors: scratch, other users
constexpr size_t kAlign = 256;
constexpr int kMaxMxfp4Cols = 7168;  // cuda.h: the MXFP4 kernels' widest row

// A device buffer that only grows; carved per call (reset() at each op).
struct Arena {
  char* base = nullptr;
  size_t cap = 0, used = 0;
  // Reserve every piece of one op first (reserve), then carve (take).
  size_t want = 0;
  void plan(size_t n) { want += (n + kAlign - 1) / kAlign * kAlign; }
  // Grows to `want` (doubling when `room` allows); false, with nothing
  // planned left, when `room` (bytes that may still be allocated) is short.
  bool begin(size_t room = SIZE_MAX) {
    if (want > cap) {
      const size_t have = room > SIZE_MAX - cap ? SIZE_MAX : cap + room;  // the old buffer goes first
      if (want > have) {
        want = 0;
        return false;
      }
      if (base) check(cudaFree(base), "cudaFree");
      base = nullptr;
      cap = std::min(std::max(want, cap * 2), have);
      check(cudaMalloc(&base, cap), "cudaMalloc (scratch)");
    }
    used = 0;
    want = 0;
    return true;
  }
  void* take(size_t n) {
    void* p = base + used;
    used += (n + kAlign - 1) / kAlign * kAlign;
    return p;
  }
};

struct Mirror {
  void* dev = nullptr;
  size_t bytes = 0;
  WeightOwner owner = 0;
  bool frag = false;  // an MXFP4 piece in fragment order (cuda.h)
};

// The VRAM expert tier (backend_cuda.h): content-keyed copies of MXFP4
// matrices (an expert's projection: packed bytes, then its scales), in
// fixed-size slots (the size of the first entry; another size bypasses the
// tier), grown on demand in blocks of up to kTierBlock while the budget and
// free VRAM (less kReserve) allow, then the least recently used slot not in
// use by the current call is evicted.
constexpr size_t kTierBlock = size_t(1) << 30;
struct Tier {
  int64_t budget = -1;  // bytes; -1: what free VRAM allows; 0: off
  size_t slot_bytes = 0;
  std::vector<char*> blocks;  // cudaMalloc'd
  struct Slot {
    char* dev = nullptr;
    uint64_t key = 0, used = 0;  // used: the clock at its last use
    bool in_call = false;        // used by the current call: not evictable
  };
  std::vector<Slot> slots;
  std::vector<int> free;
  std::unordered_map<uint64_t, int> slot_of;
  std::set<std::pair<uint64_t, int>> lru;  // (used, slot) of held slots not in the call
  std::vector<int> call;                   // slots the current call uses
  uint64_t clock = 0;
};

// Sequence state kept in VRAM (backend.h: StateStamp) — KDA states and MLA
// latent caches — by the stamp naming their bits. A decode step finds its
// layer's state here and advances it in place (re-stamped): a KDA state
// uploads nothing (its host copy is written back), an MLA cache only its new
// rows. A state the entry has not seen (a fresh sequence, a restored snapshot
// whose copy has moved on, one evicted) is uploaded whole. Least recently
// used out first past kStateCap bytes or when VRAM is short; a closed model's
// go on release().
constexpr size_t kStateCap = size_t(8) << 30;  // a K3 sequence: KDA 0.44 GB, MLA 0.22 GB at 4096 tokens
struct StateCopy {
  float* dev = nullptr;
  size_t floats = 0;  // allocated
  size_t valid = 0;   // of which hold the state's bits (an MLA cache grows into the rest)
  WeightOwner owner = 0;
  uint64_t used = 0;
};
struct StateCopies {
  std::unordered_map<uint64_t, StateCopy> by_stamp;
  uint64_t next_stamp = 1, clock = 0, bytes = 0;
  std::vector<float> host;  // host scratch of the KDA and MLA calls, reused
};

// Activations through pinned host memory (kIoBytes, made with the entry):
// a call's inputs go up by DMA from it and its outputs come back into it, to
// be copied out after the call's one sync. A copy into pageable memory waits
// for the stream each time: an expert group's 16 outputs were 16 waits, most
// of its call (sitting H: ~0.9 ms a MoE layer). What does not fit (a long
// prefill's rows) goes through pageable copies as before.
constexpr size_t kIoBytes = size_t(16) << 20;  // a K3 KDA state (6.3 MB) and a decode step's activations
constexpr size_t kIoSplitCopy = size_t(256) << 10;  // outputs this large are copied out by the kernel pool
struct PinnedIo {
  char* host = nullptr;
  size_t used = 0;
  struct Out {
    float* to;
    const char* from;
    size_t n;
  };
  std::vector<Out> outs;  // copied out at the call's sync
};

struct State {
  std::mutex mu;
  const Backend* cpu = nullptr;
  Backend table{};
  cudaStream_t stream = nullptr;
  std::unique_ptr<Uploader> up;
  Arena arena;
  PinnedIo io;
  std::unordered_map<const void*, Mirror> mirrors;
  Tier tier;
  StateCopies states;
  VramLimits limits;
  uint64_t vram_peak = 0;    // total - free at most, sampled at each allocation
  bool sequence_ops = true;  // the KDA recurrence and MLA attention here (SLUICE_CUDA_OPS)
  bool frag = true;          // MXFP4 in fragment order where the shape allows (SLUICE_CUDA_MXFP4)
  EntryStats stats;
  std::string device;
  // Host ranges pinned by register_host: start -> bytes. Its own mutex: the
  // expert source's helper thread registers while another thread computes.
  std::mutex pinned_mu;
  std::map<uintptr_t, size_t> pinned;
  uint64_t pinned_bytes = 0;
  // --gpu-spill split: the probe calls' times and bytes, the share kept after them.
  struct Split {
    std::vector<SplitTiming> probes;  // the one-row calls timed for the share
    double share = 0;
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    cudaEvent_t read[2] = {nullptr, nullptr};  // a block buffer's GEMV done (its next DMA may start)
    std::vector<float> rows;  // the CPU's rows of a several-row product
  } split;
};

State& st() {
  static State* s = new State;  // never destroyed: the entry may be called during static teardown
  return *s;
}

// What is in use on the card now (total - free), noted in the peak.
size_t vram_used(State& s, size_t* total = nullptr) {
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  if (total) *total = total_b;
  s.vram_peak = std::max<uint64_t>(s.vram_peak, total_b - free_b);
  return total_b - free_b;
}

// May `n` more bytes be held (a mirror, a tier block, a state copy)? Under a
// budget: what is in use plus n plus the part of the arena's scratch not yet
// allocated (the arena's own bytes are in use already); else `keep` bytes left free.
bool vram_room(State& s, size_t n, size_t keep) {
  size_t total = 0;
  const size_t used = vram_used(s, &total);
  if (s.limits.budget < 0) return total - used >= n + keep;
  const size_t scratch = size_t(s.limits.scratch), unheld = scratch > s.arena.cap ? scratch - s.arena.cap : 0;
  return used + n + unheld <= size_t(s.limits.budget);
}

// What the placement gave the mirrors, the tier and the state copies that they
// have not allocated yet (a first token mirrors and fills as it goes).
size_t promised(const State& s) {
  const auto rest = [](int64_t limit, uint64_t held) { return limit > 0 && uint64_t(limit) > held ? size_t(limit - held) : 0; };
  const size_t tier_held = s.tier.slots.size() * s.tier.slot_bytes;
  return rest(s.limits.spine, s.stats.resident_bytes) + rest(s.tier.budget, tier_held) +
         rest(s.limits.state, s.states.bytes);
}

// What --vram leaves the arena beyond what is in use on the card and what the
// placement promised the rest (no --vram: no bound). Without the promise, a
// first token's arena (doubling as it grows, or split's blocks) took the VRAM
// the tier would fill a moment later, which then churned (sitting E).
size_t budget_left(State& s) {
  if (s.limits.budget < 0) return SIZE_MAX / 4;
  const size_t used = vram_used(s) + promised(s);
  return used >= size_t(s.limits.budget) ? 0 : size_t(s.limits.budget) - used;
}

// The arena's begin under the budget (the scratch is its own). Every call
// begins here before its first activation goes up: the pinned I/O starts
// empty too (what an aborted call left is dropped).
bool arena_begin(State& s) {
  s.io.used = 0;
  s.io.outs.clear();
  if (s.arena.want <= s.arena.cap) return s.arena.begin();  // no allocation
  const bool ok = s.arena.begin(budget_left(s));
  if (ok) vram_used(s);
  return ok;
}

// How a weight piece lies on the device: its host bytes as they are, or an
// MXFP4 piece (the codes or the scales of a rows × cols matrix) permuted into
// fragment order (cuda.h), which may be larger (rows padded).
struct DeviceLayout {
  bool frag = false, codes = false;
  int rows = 0, cols = 0;
  size_t dev_bytes(size_t host_bytes) const {
    if (!frag) return host_bytes;
    return codes ? mxfp4_frag_packed_bytes(rows, cols) : mxfp4_frag_scale_bytes(rows, cols);
  }
  // src: the host bytes already on the device; dst: dev_bytes of them.
  void permute(const void* src, void* dst, cudaStream_t stream) const {
    const auto* from = static_cast<const uint8_t*>(src);
    auto* to = static_cast<uint8_t*>(dst);
    if (codes)
      mxfp4_frag_packed(from, rows, cols, to, stream);
    else
      mxfp4_frag_scale(from, rows, cols, to, stream);
  }
};

// Where the weight bytes [p, p+n) are on the device: a mirror (owner != 0,
// made now if VRAM allows), else nullptr (the caller uploads into the arena).
const void* mirrored(State& s, const void* p, size_t n, WeightOwner owner, const DeviceLayout& layout = {}) {
  if (owner == 0 || n == 0) return nullptr;
  const size_t dev_n = layout.dev_bytes(n);
  auto it = s.mirrors.find(p);
  if (it != s.mirrors.end()) {
    if (it->second.owner == owner && it->second.bytes >= dev_n && it->second.frag == layout.frag) return it->second.dev;
    check(cudaFree(it->second.dev), "cudaFree");
    s.stats.resident_weights--, s.stats.resident_bytes -= it->second.bytes;
    s.mirrors.erase(it);
  }
  if (s.limits.spine >= 0 && s.stats.resident_bytes + dev_n > uint64_t(s.limits.spine)) return nullptr;
  if (!vram_room(s, dev_n + (layout.frag ? n : 0), kReserve)) return nullptr;
  void* d = nullptr;
  void* staging = nullptr;
  if (cudaMalloc(&d, dev_n) != cudaSuccess || (layout.frag && cudaMalloc(&staging, n) != cudaSuccess)) {
    cudaGetLastError();  // out of memory: clear it, use the per-call path
    if (d) cudaFree(d);
    return nullptr;
  }
  s.up->copy(layout.frag ? staging : d, p, n, false);
  s.up->sync();
  if (layout.frag) {  // permuted once, here: the mirror holds fragment order
    layout.permute(staging, d, s.stream);
    check(cudaStreamSynchronize(s.stream), "fragment order");
    check(cudaFree(staging), "cudaFree");
  }
  vram_used(s);
  s.mirrors[p] = {d, dev_n, owner, layout.frag};
  s.stats.resident_weights++, s.stats.resident_bytes += dev_n;
  s.stats.resident_bytes_peak = std::max(s.stats.resident_bytes_peak, s.stats.resident_bytes);
  return d;
}

// True when [p, p+n) lies in one range pinned by register_host.
bool is_pinned(State& s, const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(s.pinned_mu);
  auto it = s.pinned.upper_bound(a);
  if (it == s.pinned.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second;
}

// Host -> device for weight bytes: straight DMA from pinned memory, else
// through the uploader's pinned staging.
void upload(State& s, void* dev, const void* host, size_t n) {
  const bool pinned = is_pinned(s, host, n);
  s.up->copy(dev, host, n, pinned);
  s.stats.uploaded_bytes += n;
  (pinned ? s.stats.uploaded_pinned_bytes : s.stats.uploaded_staged_bytes) += n;
}

void tier_drop_all(Tier& t) {
  for (char* b : t.blocks) cudaFree(b);
  const int64_t budget = t.budget;
  t = Tier{};
  t.budget = budget;
}

// Grows the tier by one block of slots; false when the budget or VRAM is out.
bool tier_grow(State& s) {
  Tier& t = s.tier;
  size_t n = kTierBlock / t.slot_bytes;
  if (t.budget > 0) {
    const size_t held = t.slots.size() * t.slot_bytes;
    if (held + t.slot_bytes > size_t(t.budget)) return false;
    n = std::min(n, (size_t(t.budget) - held) / t.slot_bytes);
  }
  if (!vram_room(s, t.slot_bytes, kReserve)) return false;
  while (n > 1 && !vram_room(s, n * t.slot_bytes, kReserve)) n /= 2;
  char* d = nullptr;
  if (cudaMalloc(&d, n * t.slot_bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  vram_used(s);
  t.blocks.push_back(d);
  for (size_t i = 0; i < n; i++) {
    t.free.push_back(int(t.slots.size()));
    t.slots.push_back({d + i * t.slot_bytes, 0, 0, false});
  }
  s.stats.tier_bytes = t.slots.size() * t.slot_bytes;
  return true;
}

// The tier's slot for `key` (an entry of `bytes`), held for the current call:
// *fresh set when the caller must upload its bytes now. -1: not in the tier
// (off, another size, or every slot in use by this call).
int tier_get(State& s, uint64_t key, size_t bytes, bool* fresh) {
  Tier& t = s.tier;
  *fresh = false;
  if (t.budget == 0 || key == 0) return -1;
  if (t.slot_bytes == 0) t.slot_bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  if (bytes > t.slot_bytes || bytes + kAlign <= t.slot_bytes) return -1;
  int slot = -1;
  auto it = t.slot_of.find(key);
  if (it != t.slot_of.end()) {
    slot = it->second;
    s.stats.tier_hits++;
  } else {
    if (t.free.empty() && !tier_grow(s) && !t.lru.empty()) {
      const int victim = t.lru.begin()->second;
      t.lru.erase(t.lru.begin());
      t.slot_of.erase(t.slots[size_t(victim)].key);
      t.slots[size_t(victim)].key = 0;
      t.free.push_back(victim);
      s.stats.tier_evictions++;
    }
    if (t.free.empty()) return -1;
    slot = t.free.back();
    t.free.pop_back();
    t.slots[size_t(slot)].key = key;
    t.slot_of[key] = slot;
    *fresh = true;
    s.stats.tier_misses++;
  }
  Tier::Slot& sl = t.slots[size_t(slot)];
  if (!sl.in_call) {
    if (!*fresh) t.lru.erase({sl.used, slot});
    sl.in_call = true;
    t.call.push_back(slot);
  }
  return slot;
}

// A slot taken for a fill that will not happen: free again, its key forgotten.
void tier_unfill(Tier& t, int slot) {
  Tier::Slot& sl = t.slots[size_t(slot)];
  t.slot_of.erase(sl.key);
  sl.key = 0;
  sl.in_call = false;
  t.call.erase(std::find(t.call.begin(), t.call.end(), slot));
  t.free.push_back(slot);
}

// The call is done with its slots: evictable again, most recent last.
void tier_end_call(Tier& t) {
  t.clock++;
  for (int slot : t.call) {
    Tier::Slot& sl = t.slots[size_t(slot)];
    sl.in_call = false;
    sl.used = t.clock;
    t.lru.insert({sl.used, slot});
  }
  t.call.clear();
}

// A weight's device bytes for this op: its mirror, or a fresh upload into the
// arena (planned by the caller with plan_weight). A piece in fragment order
// is uploaded into the arena as it is (staged) and permuted into its place
// (the arena's, or a tier slot's) on the compute stream after the uploads'
// fence (permute_staged).
struct WeightPiece {
  const void* host;
  size_t bytes;
  WeightOwner owner;
  const void* dev = nullptr;
  DeviceLayout layout{};
  void* staged = nullptr;  // fragment order: the host bytes in the arena, to permute into dev
};
// The arena bytes upload_piece stages a piece in (fragment order only).
void plan_staging(State& s, const WeightPiece& w) {
  if (w.layout.frag) s.arena.plan(w.bytes);
}
void plan_weight(State& s, WeightPiece& w) {
  w.dev = mirrored(s, w.host, w.bytes, w.owner, w.layout);
  if (w.dev) return;
  s.arena.plan(w.layout.dev_bytes(w.bytes));
  plan_staging(s, w);
}
// Uploads the piece's host bytes to `dev` (fragment order: to staging, noted
// for permute_staged).
void upload_piece(State& s, WeightPiece& w, void* dev) {
  if (w.layout.frag) {
    w.staged = s.arena.take(w.bytes);
    upload(s, w.staged, w.host, w.bytes);
  } else {
    upload(s, dev, w.host, w.bytes);
  }
  w.dev = dev;
}
const void* place_weight(State& s, WeightPiece& w) {
  if (w.dev) return w.dev;
  upload_piece(s, w, s.arena.take(w.layout.dev_bytes(w.bytes)));
  return w.dev;
}
// After the fence: staged pieces into fragment order in their places.
void permute_staged(State& s, WeightPiece& w) {
  if (!w.staged) return;
  w.layout.permute(w.staged, const_cast<void*>(w.dev), s.stream);
  w.staged = nullptr;
  s.stats.frag_permuted_bytes += w.bytes;
}

// `bytes` of the pinned I/O for this call, or nullptr when it is full.
char* io_take(State& s, size_t bytes) {
  const size_t at = (s.io.used + kAlign - 1) / kAlign * kAlign;
  if (!s.io.host || at + bytes > kIoBytes) return nullptr;
  s.io.used = at + bytes;
  return s.io.host + at;
}
float* put_floats(State& s, const float* host, size_t n) {
  float* d = static_cast<float*>(s.arena.take(n * sizeof(float)));
  if (!n) return d;
  const void* from = host;
  if (char* pinned = io_take(s, n * sizeof(float))) from = std::memcpy(pinned, host, n * sizeof(float));
  check(cudaMemcpyAsync(d, from, n * sizeof(float), cudaMemcpyHostToDevice, s.stream), "h2d (activations)");
  return d;
}
// Into `host` now: the host waits for the stream (a call that reads it before its end).
void get_floats(State& s, float* host, const float* dev, size_t n) {
  if (n) check(cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost, s.stream), "d2h");
}
// Into `host` by the end of the call (finish): through the pinned I/O where it fits.
void get_floats_at_finish(State& s, float* host, const float* dev, size_t n) {
  if (!n) return;
  char* pinned = io_take(s, n * sizeof(float));
  if (!pinned) return get_floats(s, host, dev, n);
  check(cudaMemcpyAsync(pinned, dev, n * sizeof(float), cudaMemcpyDeviceToHost, s.stream), "d2h");
  s.io.outs.push_back({host, pinned, n});
}
// Times one GPU product call, the lock held (where a step's time goes:
// inside the entry's products, or in the CPU's ops and the engine).
// `kind`: the s.stats.call_times field the call's time goes to as well.
struct CallTimer {
  State& s;
  double* kind;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~CallTimer() { *kind += seconds_since(t0); }
};
void finish(State& s) {
  const auto t0 = std::chrono::steady_clock::now();
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize");
  s.stats.call_times.sync += seconds_since(t0);
  for (const PinnedIo::Out& o : s.io.outs) {
    if (o.n * sizeof(float) < kIoSplitCopy) {
      std::memcpy(o.to, o.from, o.n * sizeof(float));
      continue;
    }
    // A KDA state (6.3 MB a K3 layer): one thread's copy took ~0.6 ms of
    // its ~0.75 ms call; the pool's threads share it.
    const int64_t blocks = int64_t((o.n * sizeof(float) + kIoSplitCopy - 1) / kIoSplitCopy);
    kernels::parallel_for(blocks, [&](int64_t b0, int64_t b1) {
      const size_t f0 = size_t(b0) * kIoSplitCopy / sizeof(float);
      const size_t f1 = std::min(o.n, size_t(b1) * kIoSplitCopy / sizeof(float));
      std::memcpy(o.to + f0, o.from + f0 * sizeof(float), (f1 - f0) * sizeof(float));
    });
  }
  s.io.outs.clear();
  s.io.used = 0;
  s.stats.gpu_calls++;
}

// A product the CPU entry runs instead (VramLimits): noted, the lock dropped.
template <class F>
void on_cpu(State& s, std::unique_lock<std::mutex>& lock, size_t weight_bytes, F&& f) {
  s.stats.cpu_spill_calls++;
  s.stats.cpu_spill_bytes += weight_bytes;
  s.arena.want = 0;  // what the GPU path had planned is not taken: the next op plans afresh
  lock.unlock();
  f();
}

// --gpu-spill split (VramLimits::split_spill): a bf16 matrix the GPU does not
// hold, in pinned RAM, is computed by both at once: its first rows on the GPU
// after a DMA upload (the bus is a second path to RAM, beside the CPU's
// memory channels), the rest by the CPU entry from RAM while the upload runs.
// The GPU's share of the rows is VramLimits::gpu_share, or, when that is 0,
// measured: the first kSplitProbe one-row calls (decode's matvecs) run at a
// quarter, timing both sides (they run together, so each rate includes the
// other's contention), and the share that would have them finish together
// (kernels/split_share.h: each side a fixed cost per call and a rate) is
// kept for the process. Several-row calls (a prefill) are not timed: there the
// CPU's product is slower per byte than its matvec, the GPU's is not, and a
// share measured on them gave decode too many rows for the bus (sitting D)
// (rounded to 1/32: a process's bits are its own; two processes may split at
// different rows and agree within the GPU's contract, not bitwise).
constexpr int kSplitProbe = 24;
constexpr double kSplitProbeShare = 0.25;
constexpr int kSplitAlign = 16;  // rows

double split_share(State& s) {
  if (s.limits.gpu_share > 0) return std::min(s.limits.gpu_share, 0.95);
  if (s.split.share > 0) return s.split.share;
  if (int(s.split.probes.size()) < kSplitProbe) return kSplitProbeShare;
  const double share = balanced_split_share(s.split.probes, kSplitProbeShare);
  s.split.share = share > 0 ? std::clamp(std::round(32.0 * share) / 32.0, 1.0 / 32, 0.75) : kSplitProbeShare;
  return s.split.share;
}

// Rows [0, r) on the GPU, [r, rows) on the CPU, at once. The GPU's rows go
// through the arena (at most the scratch --vram keeps for it) in blocks, two
// buffers taking turns (block k+1's DMA runs under block k's GEMV), so a
// matrix larger than the arena (a big head on a small card) is split too.
// False (nothing done) when not even two blocks of kSplitAlign rows fit.
bool split_matmul_bf16(State& s, const Bf16Ref& W, const float* X, int n, float* Y) {
  const int r = int(std::floor(W.rows * split_share(s) / kSplitAlign)) * kSplitAlign;
  if (r <= 0 || r >= W.rows) return false;
  const size_t row_bytes = size_t(W.cols) * 2, io = (size_t(n) * W.cols + size_t(n) * r) * sizeof(float) + 4 * kAlign;
  // What the arena may hold: what it has when the GPU's rows fit in that (no
  // driver call), else that plus what --vram leaves (cudaMemGetInfo).
  const auto capped = [&](size_t b) { return s.limits.scratch > 0 ? std::min(b, size_t(s.limits.scratch)) : b; };
  size_t room = capped(s.arena.cap);
  if (room < size_t(r) * row_bytes + io) room = capped(s.arena.cap + budget_left(s));
  if (room < io + 2 * kSplitAlign * row_bytes) return false;
  int block = r;
  if (size_t(r) * row_bytes + io > room)
    block = int((room - io) / 2 / row_bytes / kSplitAlign) * kSplitAlign;  // two buffers
  const int buffers = block < r ? 2 : 1;
  for (int b = 0; b < buffers; b++) s.arena.plan(size_t(block) * row_bytes);
  s.arena.plan(size_t(n) * W.cols * sizeof(float));
  s.arena.plan(size_t(n) * r * sizeof(float));
  if (!arena_begin(s)) return false;
  if (!s.split.t0) {
    check(cudaEventCreate(&s.split.t0), "cudaEventCreate");
    check(cudaEventCreate(&s.split.t1), "cudaEventCreate");
    for (cudaEvent_t& e : s.split.read) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  }
  const CallTimer timer{s, &s.stats.call_times.split};
  check(cudaEventRecord(s.split.t0, s.stream), "cudaEventRecord");
  void* buf[2] = {s.arena.take(size_t(block) * row_bytes), buffers > 1 ? s.arena.take(size_t(block) * row_bytes) : nullptr};
  const float* dx = put_floats(s, X, size_t(n) * W.cols);  // before the upload: a pageable one waits for the stream
  float* dy = static_cast<float*>(s.arena.take(size_t(n) * r * sizeof(float)));
  for (int a = 0, k = 0; a < r; a += block, k++) {
    const int rows = std::min(block, r - a);
    // The buffer's previous block has been read by its GEMV before this DMA overwrites it.
    if (k >= 2) check(cudaStreamWaitEvent(as_stream(s.up->stream()), s.split.read[k % 2], 0), "cudaStreamWaitEvent");
    upload(s, buf[k % 2], W.w + size_t(a) * W.cols, size_t(rows) * row_bytes);
    s.up->fence(s.stream);
    float* y = dy + size_t(n) * a;  // [n][rows]
    matmul_bf16(static_cast<const uint16_t*>(buf[k % 2]), rows, W.cols, dx, n, y, s.stream);
    check(cudaEventRecord(s.split.read[k % 2], s.stream), "cudaEventRecord");
  }
  s.stats.weight_bytes += size_t(r) * row_bytes;
  check(cudaEventRecord(s.split.t1, s.stream), "cudaEventRecord");
  // The CPU's rows meanwhile.
  const int rest = W.rows - r;
  const Bf16Ref bottom{W.w + size_t(r) * W.cols, rest, W.cols, W.owner};
  const auto c0 = std::chrono::steady_clock::now();
  std::vector<float>& tmp = s.split.rows;
  if (n == 1) {
    s.cpu->matmul_bf16(bottom, X, 1, Y + r);
  } else {
    tmp.resize(size_t(n) * rest);
    s.cpu->matmul_bf16(bottom, X, n, tmp.data());
  }
  const double cpu_s = seconds_since(c0);
  s.stats.call_times.split_cpu += cpu_s;
  // The GPU's rows back: one row's through the pinned I/O (its blocks lie
  // in order, [0, r) as in Y); several rows' after the CPU's (a copy into
  // pageable memory waits for the stream).
  if (n == 1) {
    get_floats_at_finish(s, Y, dy, size_t(r));
  } else {
    for (int a = 0; a < r; a += block) {
      const int rows = std::min(block, r - a);
      check(cudaMemcpy2DAsync(Y + a, size_t(W.rows) * sizeof(float), dy + size_t(n) * a, size_t(rows) * sizeof(float),
                              size_t(rows) * sizeof(float), size_t(n), cudaMemcpyDeviceToHost, s.stream),
            "d2h (split rows)");
    }
  }
  finish(s);
  if (n > 1)
    for (int t = 0; t < n; t++)
      std::memcpy(Y + size_t(t) * W.rows + r, tmp.data() + size_t(t) * rest, size_t(rest) * sizeof(float));
  float gpu_ms = 0;
  check(cudaEventElapsedTime(&gpu_ms, s.split.t0, s.split.t1), "cudaEventElapsedTime");
  s.stats.call_times.split_gpu += gpu_ms * 1e-3;
  if (n == 1 && s.split.share <= 0 && s.limits.gpu_share <= 0 && int(s.split.probes.size()) < kSplitProbe)
    s.split.probes.push_back({double(W.rows) * double(row_bytes), gpu_ms * 1e-3, cpu_s});
  s.stats.split_calls++;
  s.stats.cpu_spill_bytes += uint64_t(rest) * row_bytes;
  return true;
}

void gpu_matmul_bf16(const Bf16Ref& W, const float* X, int n, float* Y) {
  State& s = st();
  std::unique_lock<std::mutex> lock(s.mu);
  if (n <= 0 || W.rows <= 0) return;
  WeightPiece w{W.w, size_t(W.rows) * size_t(W.cols) * 2, W.owner};
  plan_weight(s, w);
  auto cpu = [&] { on_cpu(s, lock, w.bytes, [&] { s.cpu->matmul_bf16(W, X, n, Y); }); };
  if (!w.dev && s.limits.cpu_spill) {  // not on the GPU: the CPU from RAM (and the GPU over the bus, split)
    s.arena.want = 0;  // the whole matrix was planned: the split plans its part
    if (s.limits.split_spill && is_pinned(s, w.host, w.bytes) && split_matmul_bf16(s, W, X, n, Y)) return;
    return cpu();
  }
  const CallTimer timer{s, &s.stats.call_times.bf16};
  s.arena.plan(size_t(n) * W.cols * sizeof(float));
  s.arena.plan(size_t(n) * W.rows * sizeof(float));
  if (!arena_begin(s)) return cpu();
  const uint16_t* dw = static_cast<const uint16_t*>(place_weight(s, w));
  s.stats.weight_bytes += w.bytes;
  s.up->fence(s.stream);
  const float* dx = put_floats(s, X, size_t(n) * W.cols);
  float* dy = static_cast<float*>(s.arena.take(size_t(n) * W.rows * sizeof(float)));
  matmul_bf16(dw, W.rows, W.cols, dx, n, dy, s.stream);
  get_floats_at_finish(s, Y, dy, size_t(n) * W.rows);
  finish(s);
}
void gpu_matvec_bf16(const Bf16Ref& W, const float* x, float* y) { gpu_matmul_bf16(W, x, 1, y); }

bool mxfp4_fits(const Mxfp4Ref& W) { return W.cols > 0 && W.cols % 32 == 0 && W.cols <= kMaxMxfp4Cols; }

void gpu_grouped_mxfp4(const Mxfp4Task* tasks, int ntasks) {
  if (ntasks <= 0) return;
  State& s = st();
  const Mxfp4Ref& W0 = tasks[0].W;
  if (!mxfp4_fits(W0)) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stats.cpu_matrix_calls++;
    }
    return s.cpu->grouped_mxfp4(tasks, ntasks);
  }
  std::unique_lock<std::mutex> lock(s.mu);
  const int rows = W0.rows, cols = W0.cols;
  const size_t all_bytes = size_t(ntasks) * (size_t(rows) * cols / 2 + size_t(rows) * cols / 32);
  auto cpu = [&] { on_cpu(s, lock, all_bytes, [&] { s.cpu->grouped_mxfp4(tasks, ntasks); }); };
  // Routed experts with --cpu-moe, and (spilling) transient weights that are
  // no expert (a streamed piece): the CPU where they lie.
  const bool expert = W0.owner == 0 && W0.content != 0;
  if ((expert && s.limits.cpu_experts) || (s.limits.cpu_spill && W0.owner == 0 && !expert)) return cpu();
  const CallTimer timer{s, &s.stats.call_times.mxfp4};
  // Fragment order (cuda.h) at the widths its kernel takes: every copy of
  // these matrices on the device (mirror, tier slot, arena) is permuted. The
  // layout follows from the shape (s.frag is fixed when the entry is made),
  // so a tier key never meets a copy in the other layout.
  const bool frag = s.frag && mxfp4_frag_takes(rows, cols);
  const size_t packed_bytes = size_t(rows) * cols / 2, scale_bytes = size_t(rows) * cols / 32;
  const DeviceLayout codes_layout{frag, true, rows, cols}, scale_layout{frag, false, rows, cols};
  const size_t scale_at = (codes_layout.dev_bytes(packed_bytes) + kAlign - 1) / kAlign * kAlign;  // in a tier slot
  if (s.limits.cpu_spill && W0.owner != 0)
    for (int i = 0; i < ntasks; i++)  // stable weights: all mirrored, or the CPU
      if (!mirrored(s, tasks[i].W.packed, packed_bytes, tasks[i].W.owner, codes_layout) ||
          !mirrored(s, tasks[i].W.scale, scale_bytes, tasks[i].W.owner, scale_layout))
        return cpu();
  std::vector<WeightPiece> packed, scale;
  packed.reserve(size_t(ntasks)), scale.reserve(size_t(ntasks));
  std::vector<int> fresh_slot(size_t(ntasks), -1);  // tier slots to fill this call
  for (int i = 0; i < ntasks; i++) {
    const Mxfp4Task& t = tasks[i];
    packed.push_back({t.W.packed, packed_bytes, t.W.owner});
    scale.push_back({t.W.scale, scale_bytes, t.W.owner});
    packed.back().layout = codes_layout, scale.back().layout = scale_layout;
    if (t.n <= 0 || rows <= 0) continue;
    s.stats.weight_bytes += packed_bytes + scale_bytes;
    s.arena.plan(size_t(t.n) * cols * sizeof(float));
    s.arena.plan(size_t(t.n) * rows * sizeof(float));
    if (t.W.owner == 0 && t.W.content != 0) {
      bool fresh = false;
      const int slot = tier_get(s, t.W.content, scale_at + scale_layout.dev_bytes(scale_bytes), &fresh);
      if (slot >= 0) {
        char* d = s.tier.slots[size_t(slot)].dev;
        packed.back().dev = d, scale.back().dev = d + scale_at;
        if (fresh) {
          fresh_slot[size_t(i)] = slot;
          plan_staging(s, packed.back());
          plan_staging(s, scale.back());
        }
        continue;
      }
    }
    plan_weight(s, packed.back());
    plan_weight(s, scale.back());
  }
  if (!arena_begin(s)) {  // no scratch within --vram: forget the slots not filled, the CPU computes
    for (int i = 0; i < ntasks; i++)
      if (fresh_slot[size_t(i)] >= 0) tier_unfill(s.tier, fresh_slot[size_t(i)]);
    tier_end_call(s.tier);
    return cpu();
  }
  std::vector<MxTask> dev(static_cast<size_t>(ntasks));
  for (int i = 0; i < ntasks; i++) {
    const Mxfp4Task& t = tasks[i];
    dev[size_t(i)] = {nullptr, nullptr, nullptr, nullptr, 0};
    if (t.n <= 0 || rows <= 0) continue;
    if (fresh_slot[size_t(i)] >= 0) {  // a tier miss: its bytes into the slot (placed above)
      upload_piece(s, packed[size_t(i)], const_cast<void*>(packed[size_t(i)].dev));
      upload_piece(s, scale[size_t(i)], const_cast<void*>(scale[size_t(i)].dev));
    }
    dev[size_t(i)].packed = static_cast<const uint8_t*>(place_weight(s, packed[size_t(i)]));
    dev[size_t(i)].scale = static_cast<const uint8_t*>(place_weight(s, scale[size_t(i)]));
    dev[size_t(i)].n = t.n;
  }
  s.up->fence(s.stream);
  for (int i = 0; i < ntasks; i++) {
    const Mxfp4Task& t = tasks[i];
    if (t.n <= 0 || rows <= 0) continue;
    permute_staged(s, packed[size_t(i)]);
    permute_staged(s, scale[size_t(i)]);
    dev[size_t(i)].X = put_floats(s, t.X, size_t(t.n) * cols);
    dev[size_t(i)].Y = static_cast<float*>(s.arena.take(size_t(t.n) * rows * sizeof(float)));
  }
  if (frag) {
    grouped_mxfp4_frag(dev.data(), ntasks, rows, cols, s.stream);
    s.stats.frag_calls++;
  } else {
    grouped_mxfp4(dev.data(), ntasks, rows, cols, s.stream);
  }
  for (int i = 0; i < ntasks; i++)
    if (tasks[i].n > 0 && rows > 0) get_floats_at_finish(s, tasks[i].Y, dev[size_t(i)].Y, size_t(tasks[i].n) * rows);
  finish(s);
  tier_end_call(s.tier);
}
void gpu_matmul_mxfp4(const Mxfp4Ref& W, const float* X, int n, float* Y) {
  const Mxfp4Task t{W, X, Y, n};
  gpu_grouped_mxfp4(&t, 1);
}
void gpu_matvec_mxfp4(const Mxfp4Ref& W, const float* x, float* y) { gpu_matmul_mxfp4(W, x, 1, y); }

// ---- Sequence-state copies (StateCopies) -------------------------------------

void drop_state(State& s, std::unordered_map<uint64_t, StateCopy>::iterator it) {
  cudaFree(it->second.dev);
  s.states.bytes -= it->second.floats * sizeof(float);
  s.states.by_stamp.erase(it);
  s.stats.state_bytes = s.states.bytes;
}

// Takes the copy stamped `stamp` out of the map if it holds at least `valid`
// floats of the state's bits (the caller puts it back with put_copy, or frees
// it); false: none (stamp 0, evicted, or moved on).
bool take_copy(State& s, uint64_t stamp, size_t valid, StateCopy* c) {
  auto it = stamp ? s.states.by_stamp.find(stamp) : s.states.by_stamp.end();
  if (it == s.states.by_stamp.end()) return false;
  if (it->second.valid < valid) {
    drop_state(s, it);
    return false;
  }
  *c = it->second;
  s.states.bytes -= c->floats * sizeof(float);
  s.states.by_stamp.erase(it);
  return true;
}

// Puts a copy (back) under `stamp`, or under a fresh one when 0; returns it.
uint64_t put_copy(State& s, uint64_t stamp, StateCopy c) {
  if (stamp == 0) stamp = s.states.next_stamp++;
  c.used = ++s.states.clock;
  s.states.by_stamp[stamp] = c;
  s.states.bytes += c.floats * sizeof(float);
  s.stats.state_bytes = s.states.bytes;
  return stamp;
}

// A fresh VRAM buffer for a state of `floats`, evicting the least recently
// used copies past the cap or while VRAM is short (states may use half the
// reserve the mirrors leave: they are small and every step needs them).
// nullptr: none to be had (the call then uses its arena).
float* new_state_buffer(State& s, size_t floats) {
  const size_t n = floats * sizeof(float);
  auto lru = [&] {
    auto victim = s.states.by_stamp.begin();
    for (auto it = s.states.by_stamp.begin(); it != s.states.by_stamp.end(); ++it)
      if (it->second.used < victim->second.used) victim = it;
    return victim;
  };
  const size_t cap = s.limits.state >= 0 ? size_t(s.limits.state) : kStateCap;
  if (n > cap) return nullptr;
  while (!s.states.by_stamp.empty() && s.states.bytes + n > cap) drop_state(s, lru());
  for (;;) {
    if (vram_room(s, n, kReserve / 2)) {
      float* d = nullptr;
      if (cudaMalloc(&d, n) == cudaSuccess) {
        vram_used(s);
        return d;
      }
      cudaGetLastError();
    }
    if (s.states.by_stamp.empty()) return nullptr;
    drop_state(s, lru());
  }
}

// ---- KDA ---------------------------------------------------------------------

// kda_chunk (backend.h): the conv, norms and gates on the host (kda::prepare,
// the scalar entry's own code: their exp and sqrt are the host's), the
// recurrence on the GPU against the state's VRAM copy, the gated output norm
// on the host. Bitwise the scalar entry.
void gpu_kda_chunk(const KdaDims& d, const KdaParams& w, const float* S_from, float* S, float* conv, int T,
                   const KdaRows& in, float* out, StateStamp* stamp) {
  const bool in_place = S_from == S;
  if (T <= 0) {
    if (stamp) stamp->to = in_place ? stamp->from : 0;
    return;
  }
  State& s = st();
  std::unique_lock<std::mutex> lock(s.mu);
  const int NH = d.heads, D = d.dim, C = NH * D;
  const size_t TC = size_t(T) * C, nS = size_t(NH) * D * D;
  // The arena at its most (no state copy found or made) before anything
  // advances: under --vram a chunk it cannot hold runs on the CPU entry.
  s.arena.plan((5 * TC + size_t(T) * NH + 2 * nS) * sizeof(float));
  if (!arena_begin(s))
    return on_cpu(s, lock, 0, [&] { s.cpu->kda_chunk(d, w, S_from, S, conv, T, in, out, stamp); });
  const CallTimer timer{s, &s.stats.call_times.kda};

  // Host: every position's prepared rows (conv advances here).
  std::vector<float>& h = s.states.host;
  h.resize(4 * TC + size_t(T) * NH);
  float *qc = h.data(), *kc = qc + TC, *vc = kc + TC, *dec = vc + TC, *b = dec + TC;
  // Heads are independent in prepare (each its own channels and conv
  // history): split over the CPU's kernel pool, each range's positions in order.
  kernels::parallel_for(NH, [&](int64_t h0, int64_t h1) {
    for (int t = 0; t < T; t++) {
      const size_t row = size_t(t) * C;
      kda::prepare(d, w, conv, in.q + row, in.k + row, in.v + row, in.f + row, in.beta + size_t(t) * NH, qc + row,
                   kc + row, vc + row, dec + row, b + size_t(t) * NH, int(h0), int(h1));
    }
  });

  // The state's VRAM copy: found by its stamp, else uploaded.
  StateCopy from_copy;  // out of the map while this call uses it
  const bool have = take_copy(s, stamp ? stamp->from : 0, nS, &from_copy);
  if (have) s.stats.kda_state_hits++;
  // Where S's new bits go: in place, the copy itself (re-stamped below: its
  // old bits are gone); else a new copy (the pre-chunk one stays as it is: an
  // undo record holds those bits), or the arena when VRAM has no room.
  float* keep = have && in_place ? from_copy.dev : new_state_buffer(s, nS);
  if (have && !in_place) put_copy(s, stamp->from, from_copy);
  s.arena.plan(4 * TC * sizeof(float) + size_t(T) * NH * sizeof(float));
  if (out) s.arena.plan(TC * sizeof(float));
  if (!keep) s.arena.plan(nS * sizeof(float));
  if (!have && !in_place) s.arena.plan(nS * sizeof(float));
  arena_begin(s);  // within the cap reserved above
  float* dS = keep ? keep : static_cast<float*>(s.arena.take(nS * sizeof(float)));
  float* dF = in_place ? dS : have ? from_copy.dev : static_cast<float*>(s.arena.take(nS * sizeof(float)));
  if (!have) {  // the state's bits from the host
    check(cudaMemcpyAsync(dF, S_from, nS * sizeof(float), cudaMemcpyHostToDevice, s.stream), "h2d (KDA state)");
    s.stats.kda_state_uploaded_bytes += nS * sizeof(float);
  }
  const float* dq = put_floats(s, qc, 4 * TC + size_t(T) * NH);
  float* dout = out ? static_cast<float*>(s.arena.take(TC * sizeof(float))) : nullptr;
  kda_recur(NH, D, T, dF, dS, dq, dq + TC, dq + 2 * TC, dq + 3 * TC, dq + 4 * TC, dout, s.stream);
  get_floats_at_finish(s, S, dS, nS);
  if (out) get_floats_at_finish(s, out, dout, TC);
  finish(s);
  s.stats.kda_calls++;
  if (out)
    kernels::parallel_for(NH, [&](int64_t h0, int64_t h1) {
      for (int t = 0; t < T; t++)
        for (int64_t hd = h0; hd < h1; hd++) {
          const size_t at = size_t(t) * C + size_t(hd) * D;
          kda::gate(D, d.eps, w.o_norm, in.z + at, out + at);
        }
    });
  const uint64_t to = keep ? put_copy(s, 0, {keep, nS, nS, w.owner, 0}) : 0;
  if (stamp) stamp->to = to;
}

// ---- MLA attention --------------------------------------------------------

// mla_attend (backend.h): q̂, the scores and ĉ on the GPU (cuda.h: bitwise the
// scalar loops), the softmax between them on the host (ref::softmax: its exp
// is the host's), U_h ĉ this entry's bf16 GEMV, the σ(gate) on the host. So
// everything is the scalar entry's bits except U_h ĉ, as the op says. The
// latent cache stays in VRAM between calls (StateCopies): a step uploads only
// its new rows; its copy grows by doubling (rows copied on the device).
// sel null: dense; else K3.1 Pro's selection (mla_attend_sparse), uploaded
// with the call, the score rows ldsel wide.
void gpu_mla_attend_over(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T,
                         const float* q, const float* gate, const int* sel, const int* nsel, int ldsel, float* att,
                         StateStamp* stamp) {
  if (T <= 0) {  // nothing appended: the cache's bits and copy are as they were
    if (stamp) stamp->to = stamp->from;
    return;
  }
  State& s = st();
  std::unique_lock<std::mutex> lock(s.mu);
  const size_t kv_bytes = size_t(d.heads) * (d.nope + d.v_dim) * d.kv_lora * 2;
  auto cpu = [&] {
    on_cpu(s, lock, kv_bytes, [&] {
      if (sel)
        s.cpu->mla_attend_sparse(d, kv_b, cache, base, T, q, gate, sel, nsel, ldsel, att, stamp);
      else
        s.cpu->mla_attend(d, kv_b, cache, base, T, q, gate, att, stamp);
    });
  };
  if (s.limits.cpu_spill && !mirrored(s, kv_b.w, kv_bytes, kv_b.owner)) return cpu();  // kv_b not on the GPU
  const int NH = d.heads, NOPE = d.nope, ROPE = d.rope, VD = d.v_dim, KVL = d.kv_lora;
  const int QH = NOPE + ROPE, KVW = KVL + ROPE, KVB = NOPE + VD;
  const size_t ld = sel ? size_t(ldsel) : size_t(base + T), rows = size_t(T) * NH, prefix = size_t(base) * KVW,
               need = size_t(base + T) * KVW;
  const size_t sel_ints = sel ? size_t(T) * (size_t(ldsel) + 1) : 0;  // sel, then nsel
  // The arena at its most (the cache and kv_b in it), before any copy is
  // taken: under --vram a call it cannot hold runs on the CPU entry.
  for (size_t n : {need, rows * QH, rows * KVW, rows * ld, rows * KVL, rows * VD, kv_bytes / sizeof(float) + 1, sel_ints})
    s.arena.plan(n * sizeof(float));
  if (!arena_begin(s)) return cpu();
  const CallTimer timer{s, &s.stats.call_times.mla};
  const size_t cap = std::max<size_t>(2 * size_t(base + T), 64) * KVW;  // a new copy's room: twice the rows
  // The cache's VRAM copy: rows 0..base-1 found by the stamp, the new rows
  // uploaded; else a new copy (room for twice the rows) uploaded whole, or
  // the arena when VRAM has no room.
  StateCopy c;
  bool have = take_copy(s, stamp ? stamp->from : 0, prefix, &c);
  if (have) s.stats.mla_cache_hits++;
  if (have && c.floats < need) {  // grow: the old rows move on the device
    float* bigger = new_state_buffer(s, cap);
    if (bigger)
      check(cudaMemcpyAsync(bigger, c.dev, prefix * sizeof(float), cudaMemcpyDeviceToDevice, s.stream), "d2d (cache)");
    check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize");
    cudaFree(c.dev);
    have = bigger != nullptr;
    c = {bigger, cap, prefix, c.owner, 0};
  } else if (!have) {
    c = {new_state_buffer(s, cap), cap, 0, kv_b.owner, 0};
  }
  WeightPiece w{kv_b.w, size_t(NH) * KVB * KVL * 2, kv_b.owner};
  plan_weight(s, w);
  for (size_t n : {c.dev ? 0 : need, rows * QH, rows * KVW, rows * ld, rows * KVL, rows * VD, sel_ints})
    s.arena.plan(n * sizeof(float));
  arena_begin(s);  // within the cap reserved above
  const uint16_t* dw = static_cast<const uint16_t*>(place_weight(s, w));
  s.up->fence(s.stream);
  float* dcache = c.dev ? c.dev : static_cast<float*>(s.arena.take(need * sizeof(float)));
  const size_t from = have ? prefix : 0;  // the rows the device lacks
  check(cudaMemcpyAsync(dcache + from, cache + from, (need - from) * sizeof(float), cudaMemcpyHostToDevice, s.stream),
        "h2d (cache)");
  s.stats.mla_cache_uploaded_bytes += (need - from) * sizeof(float);
  const float* dq = put_floats(s, q, rows * QH);
  auto take = [&](size_t n) { return static_cast<float*>(s.arena.take(n * sizeof(float))); };
  float *dqT = take(rows * KVW), *dscore = take(rows * ld), *dchat = take(rows * KVL), *datt = take(rows * VD);
  MlaPick pick;
  if (sel) {
    int* dsel = static_cast<int*>(s.arena.take(sel_ints * sizeof(int)));
    check(cudaMemcpyAsync(dsel, sel, size_t(T) * ldsel * sizeof(int), cudaMemcpyHostToDevice, s.stream), "h2d (sel)");
    check(cudaMemcpyAsync(dsel + size_t(T) * ldsel, nsel, size_t(T) * sizeof(int), cudaMemcpyHostToDevice, s.stream),
          "h2d (nsel)");
    pick = {dsel, dsel + size_t(T) * ldsel, ldsel};
  }
  mla_qhat(dw, NH, NOPE, VD, KVL, ROPE, T, dq, dqT, s.stream);
  mla_scores(NH, KVL, ROPE, base, T, dqT, dcache, 1.0f / std::sqrt(float(QH)), dscore, s.stream, pick);
  std::vector<float>& p = s.states.host;  // host scratch, reused (the entry's calls are serialized)
  p.resize(rows * ld);
  get_floats(s, p.data(), dscore, rows * ld);
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize");
  for (int t = 0; t < T; t++)
    for (int h = 0; h < NH; h++)
      ref::softmax(p.data() + (size_t(t) * NH + h) * ld, sel ? nsel[t] : int(base + t + 1));
  check(cudaMemcpyAsync(dscore, p.data(), rows * ld * sizeof(float), cudaMemcpyHostToDevice, s.stream), "h2d (p)");
  mla_mix(NH, KVL, ROPE, base, T, dscore, dcache, dchat, s.stream, pick);
  for (size_t r = 0; r < rows; r++) {
    const int h = int(r % size_t(NH));
    matvec_bf16(dw + (size_t(h) * KVB + NOPE) * KVL, VD, KVL, dchat + r * KVL, datt + r * VD, s.stream);
  }
  s.stats.weight_bytes += w.bytes;
  get_floats(s, att, datt, rows * VD);
  finish(s);
  s.stats.mla_calls++;
  c.valid = need;
  const uint64_t to = c.dev ? put_copy(s, 0, c) : 0;
  if (stamp) stamp->to = to;
  for (size_t i = 0; i < rows * VD; i++) att[i] *= ref::sigmoid(gate[i]);
}

void gpu_mla_attend(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T, const float* q,
                    const float* gate, float* att, StateStamp* stamp) {
  gpu_mla_attend_over(d, kv_b, cache, base, T, q, gate, nullptr, nullptr, 0, att, stamp);
}
void gpu_mla_attend_sparse(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T,
                           const float* q, const float* gate, const int* sel, const int* nsel, int ldsel, float* att,
                           StateStamp* stamp) {
  gpu_mla_attend_over(d, kv_b, cache, base, T, q, gate, sel, nsel, ldsel, att, stamp);
}

// ---- K3.1 Pro's indexer ------------------------------------------------------

// dsa_select (backend.h): the score rows on the GPU (cuda.h: dsa_scores,
// bitwise dsa::scores_scalar), the top-k on the host (dsa::select_topk, the
// scalar entry's own code), so the selection is the scalar entry's. The keys
// go up with each call (512 B a position at K3.1's 128 dims); queries whose
// every position is selected (context <= top-k) need no scores. Query rows go
// in groups whose score rows fit kScoreBytes.
void gpu_dsa_select(const DsaDims& d, const float* qi, const float* w, const float* keys, int64_t base, int T, int* sel,
                    int* nsel) {
  if (T <= 0) return;
  State& s = st();
  if (base + T <= int64_t(d.topk)) return s.cpu->dsa_select(d, qi, w, keys, base, T, sel, nsel);  // no scores
  std::unique_lock<std::mutex> lock(s.mu);
  constexpr size_t kScoreBytes = size_t(64) << 20;
  const size_t ld = size_t(base + T), QW = size_t(d.heads) * d.dim;
  const int group = int(std::clamp<size_t>(kScoreBytes / sizeof(float) / ld, 1, size_t(T)));
  for (size_t n : {ld * d.dim, size_t(group) * QW, size_t(group) * d.heads, size_t(group) * ld})
    s.arena.plan(n * sizeof(float));
  if (!arena_begin(s))
    return on_cpu(s, lock, 0, [&] { s.cpu->dsa_select(d, qi, w, keys, base, T, sel, nsel); });
  const CallTimer timer{s, &s.stats.call_times.dsa};
  const float* dkeys = put_floats(s, keys, ld * d.dim);
  float* dq = static_cast<float*>(s.arena.take(size_t(group) * QW * sizeof(float)));
  float* dw = static_cast<float*>(s.arena.take(size_t(group) * d.heads * sizeof(float)));
  float* dscore = static_cast<float*>(s.arena.take(size_t(group) * ld * sizeof(float)));
  std::vector<float>& score = s.states.host;  // host scratch (the entry's calls are serialized)
  score.resize(size_t(group) * ld);
  for (int t0 = 0; t0 < T; t0 += group) {
    const int g = std::min(group, T - t0);
    check(cudaMemcpyAsync(dq, qi + size_t(t0) * QW, size_t(g) * QW * sizeof(float), cudaMemcpyHostToDevice, s.stream),
          "h2d (indexer q)");
    check(cudaMemcpyAsync(dw, w + size_t(t0) * d.heads, size_t(g) * d.heads * sizeof(float), cudaMemcpyHostToDevice,
                          s.stream),
          "h2d (indexer w)");
    dsa_scores(d.heads, d.dim, base + t0, g, dq, dw, dkeys, int(ld), dscore, s.stream);
    get_floats(s, score.data(), dscore, size_t(g) * ld);
    check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize");
    // Each query's top-k: independent rows over the CPU's kernel pool.
    kernels::parallel_for(g, [&](int64_t a, int64_t b) {
      thread_local std::vector<int> order;
      for (int64_t i = a; i < b; i++) {
        const int t = t0 + int(i);
        const int64_t n = base + t + 1;
        if (order.size() < size_t(n)) order.resize(size_t(n));
        nsel[t] = dsa::select_topk(score.data() + size_t(i) * ld, n, d.topk, order.data(), sel + size_t(t) * d.topk);
      }
    });
  }
  finish(s);
  s.stats.dsa_calls++;
}

void gpu_release(WeightOwner owner) {
  State& s = st();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto it = s.states.by_stamp.begin(); it != s.states.by_stamp.end();) {
      auto cur = it++;
      if (cur->second.owner == owner) drop_state(s, cur);
    }
    for (auto it = s.mirrors.begin(); it != s.mirrors.end();) {
      if (it->second.owner == owner) {
        cudaFree(it->second.dev);
        s.stats.resident_weights--, s.stats.resident_bytes -= it->second.bytes;
        it = s.mirrors.erase(it);
      } else {
        ++it;
      }
    }
    Tier& t = s.tier;
    for (auto it = t.slot_of.begin(); it != t.slot_of.end();) {
      if (WeightOwner(it->first >> 32) == owner) {
        Tier::Slot& sl = t.slots[size_t(it->second)];
        t.lru.erase({sl.used, it->second});
        sl.key = 0;
        t.free.push_back(it->second);
        it = t.slot_of.erase(it);
      } else {
        ++it;
      }
    }
  }
  s.cpu->release(owner);
}

void gpu_register_host(void* p, size_t n) {
  if (!p || n == 0) return;
  State& s = st();
  if (cudaHostRegister(p, n, cudaHostRegisterDefault) != cudaSuccess) {
    cudaGetLastError();  // not pinned: its uploads go through the staging
    return;
  }
  std::lock_guard<std::mutex> lock(s.pinned_mu);
  s.pinned[reinterpret_cast<uintptr_t>(p)] = n;
  s.pinned_bytes += n;
}

void gpu_unregister_host(void* p, size_t n) {
  State& s = st();
  {
    std::lock_guard<std::mutex> lock(s.pinned_mu);
    auto it = s.pinned.find(reinterpret_cast<uintptr_t>(p));
    if (it == s.pinned.end()) return;
    s.pinned_bytes -= it->second;
    s.pinned.erase(it);
  }
  (void)n;
  cudaHostUnregister(p);
  cudaGetLastError();
}

}  // namespace

Ceilings measure_ceilings() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Ceilings c;
  const size_t read_bytes = size_t(2) << 30;
  // Under --vram, only when the 2 GiB buffer fits beside what is in use (else zeros: not measured).
  if (s.limits.budget >= 0 && vram_used(s) + read_bytes + (size_t(64) << 20) > size_t(s.limits.budget)) return c;
  char* buf = nullptr;
  uint32_t* sink = nullptr;
  check(cudaMalloc(&buf, read_bytes), "cudaMalloc (ceilings)");
  check(cudaMalloc(&sink, sizeof(uint32_t)), "cudaMalloc");
  // The pinned source is the uploader's staging block (24 MiB, held since
  // the entry was made): no host memory beyond what the memory plan counted.
  // 21 copies of it, ~512 MiB, per timing.
  char* host = static_cast<char*>(s.up->staging());
  const size_t block = s.up->staging_bytes(), copies = std::max<size_t>(1, (size_t(512) << 20) / block);
  const size_t h2d_bytes = copies * block;
  std::memset(host, 0x5a, block);
  check(cudaMemset(buf, 0x5a, read_bytes), "cudaMemset");
  const int sms = sm_count();
  auto time_ms = [&](auto&& f) { return best_gpu_seconds(s.stream, 3, f) * 1e3; };  // best of 3 after a warm-up
  const double read_ms = time_ms([&] {
    read_all(buf, read_bytes, sink, sms * 8, s.stream);
  });
  const double h2d_ms = time_ms([&] {
    for (size_t i = 0; i < copies; i++)
      check(cudaMemcpyAsync(buf + i * block, host, block, cudaMemcpyHostToDevice, s.stream), "h2d");
  });
  c.hbm_read_gbs = double(read_bytes) / (read_ms * 1e-3) / 1e9;
  c.h2d_pinned_gbs = double(h2d_bytes) / (h2d_ms * 1e-3) / 1e9;
  // The GEMVs the engine runs, over this buffer's bytes (their values do not
  // change the time), 8 rotating copies each (more than L2 holds): one K3
  // decode step's gate and up projections, 32 matrices 3072 × 3584 as one
  // grouped launch in the layout the entry keeps experts in, and a bf16
  // 7168 × 7168 GEMV. GB/s of weights read.
  {
    constexpr int kCopies = 8, kMats = 32, kRows = 3072, kCols = 3584, kSide = 7168;
    const bool frag = s.frag && mxfp4_frag_takes(kRows, kCols);
    const size_t packed = frag ? mxfp4_frag_packed_bytes(kRows, kCols) : size_t(kRows) * kCols / 2;
    const size_t scale = frag ? mxfp4_frag_scale_bytes(kRows, kCols) : size_t(kRows) * kCols / 32;
    const size_t mat = (packed + scale + 255) / 256 * 256, set = mat * kMats;
    const float* x = reinterpret_cast<const float*>(buf + set * kCopies);  // 0x5a5a5a5a: a finite float
    float* y = reinterpret_cast<float*>(buf + set * kCopies + kSide * sizeof(float));
    std::vector<MxTask> tasks(size_t(kCopies) * kMats);
    for (size_t i = 0; i < tasks.size(); i++) {
      const auto* m = reinterpret_cast<const uint8_t*>(buf + i * mat);
      tasks[i] = {m, m + packed, x, y + (i % kMats) * kRows, 1};
    }
    const double mx_ms = time_ms([&] {
      for (int k = 0; k < kCopies; k++) {
        const MxTask* t = tasks.data() + size_t(k) * kMats;
        if (frag)
          grouped_mxfp4_frag(t, kMats, kRows, kCols, s.stream);
        else
          grouped_mxfp4(t, kMats, kRows, kCols, s.stream);
      }
    });
    c.mxfp4_gemv_gbs = double(kCopies) * kMats * double(size_t(kRows) * kCols / 2 + size_t(kRows) * kCols / 32) /
                       (mx_ms * 1e-3) / 1e9;
    const size_t w = size_t(kSide) * kSide * 2;
    const double bf_ms = time_ms([&] {
      for (int k = 0; k < kCopies; k++)
        matvec_bf16(reinterpret_cast<const uint16_t*>(buf + size_t(k) * w), kSide, kSide, x, y, s.stream);
    });
    c.bf16_gemv_gbs = double(kCopies) * double(w) / (bf_ms * 1e-3) / 1e9;
  }
  cudaFree(sink);
  cudaFree(buf);
  return c;
}

namespace {
// One small product of each kind, so the driver's first-launch allocations
// happen now (host memory the plan's baseline counts), not mid-run.
void warm_up(cudaStream_t stream) {
  const int rows = 4, cols = 32;
  char* d = nullptr;
  check(cudaMalloc(&d, 32768), "cudaMalloc (warm-up)");
  check(cudaMemsetAsync(d, 0, 32768, stream), "cudaMemset");
  const float* x = reinterpret_cast<const float*>(d);
  float* y = reinterpret_cast<float*>(d + 2048);
  matvec_bf16(reinterpret_cast<const uint16_t*>(d + 1024), rows, cols, x, y, stream);
  matvec_mxfp4(reinterpret_cast<const uint8_t*>(d + 1024), reinterpret_cast<const uint8_t*>(d + 1536), rows, cols, x,
               y, stream);
  // Fragment order: one row of 1024 columns (codes 16 KB at 8 KB, scales 1 KB at 24 KB).
  const auto* fp = reinterpret_cast<const uint8_t*>(d + 8192);
  const MxTask one{fp, fp + 16384, x, y, 1};
  grouped_mxfp4_frag(&one, 1, 1, 1024, stream);
  check(cudaStreamSynchronize(stream), "warm-up");
  check(cudaFree(d), "cudaFree");
}
}  // namespace

const Backend* backend_entry(const Backend& cpu, std::string* why) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.cpu) return &s.table;
  // Every kernel module now, with the context, rather than at its first
  // launch mid-run: host memory the plan's baseline then counts (see the
  // header). Only if nothing set it and no CUDA call ran yet in this process.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (device_count() == 0) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError();
    if (why) *why = e == cudaSuccess ? "no CUDA device found" : std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
    return nullptr;
  }
  try {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    s.stream = stream;
    s.up = std::make_unique<Uploader>(size_t(8) << 20, 3);
    void* io = nullptr;  // held from here on, touched now: the memory plan's baseline counts it
    check(cudaHostAlloc(&io, kIoBytes, cudaHostAllocDefault), "cudaHostAlloc (activations)");
    std::memset(io, 0, kIoBytes);
    s.io.host = static_cast<char*>(io);
    s.device = device_name();
    warm_up(stream);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return nullptr;
  }
  s.table = cpu;  // the ops the GPU lacks: the CPU entry's own functions
  s.table.name = "cuda";
  s.table.matvec_bf16 = gpu_matvec_bf16;
  s.table.matmul_bf16 = gpu_matmul_bf16;
  s.table.matvec_mxfp4 = gpu_matvec_mxfp4;
  s.table.matmul_mxfp4 = gpu_matmul_mxfp4;
  s.table.grouped_mxfp4 = gpu_grouped_mxfp4;
  const char* mx = std::getenv("SLUICE_CUDA_MXFP4");
  s.frag = !(mx && std::strcmp(mx, "rows") == 0);
  const char* ops = std::getenv("SLUICE_CUDA_OPS");
  s.sequence_ops = !(ops && std::strcmp(ops, "products") == 0);
  if (s.sequence_ops) {
    s.table.kda_chunk = gpu_kda_chunk;
    s.table.mla_attend = gpu_mla_attend;
    s.table.dsa_select = gpu_dsa_select;
    s.table.mla_attend_sparse = gpu_mla_attend_sparse;
  }
  s.table.release = gpu_release;
  s.table.register_host = gpu_register_host;
  s.table.unregister_host = gpu_unregister_host;
  s.cpu = &cpu;
  return &s.table;
}

EntryStats entry_stats() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  EntryStats r = s.stats;
  r.split_share = s.limits.split_spill ? split_share(s) : 0.0;
  std::lock_guard<std::mutex> lock2(s.pinned_mu);
  r.pinned_host_bytes = s.pinned_bytes;
  return r;
}

void set_vram_limits(const VramLimits& limits) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.limits = limits;
}

VramUse vram_use() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  VramUse u;
  if (!s.cpu) return u;
  size_t total = 0;
  u.used = vram_used(s, &total);
  u.total = total;
  u.peak = s.vram_peak;
  return u;
}

void set_vram_experts(int64_t bytes) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  tier_drop_all(s.tier);
  s.tier.budget = bytes < 0 ? -1 : bytes;
  s.stats.tier_bytes = 0;
}

std::string describe() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.cpu) return "cuda (not initialized)";
  const std::string products = s.device + "; GPU: matvec/matmul bf16 and MXFP4, grouped MXFP4 (MXFP4 rows up to " +
                               std::to_string(kMaxMxfp4Cols) + " columns; " +
                               (s.frag ? "in fragment order on tensor cores at widths % 128 == 0 from 1024"
                                       : "the row kernels only: SLUICE_CUDA_MXFP4=rows") +
                               ")";
  if (!s.sequence_ops)
    return products + "; CPU (" + s.cpu->name +
           "): int8 products, rmsnorm, add, SiTU-GLU, AttnRes, router, MoE combine, KDA, MLA attention "
           "(SLUICE_CUDA_OPS=products)";
  return products + ", the KDA recurrence, MLA attention (state in VRAM), K3.1's indexer scores and sparse MLA; CPU (" + s.cpu->name +
         "): int8 products, rmsnorm, add, SiTU-GLU, AttnRes, router, MoE combine, KDA conv/norms/gates, softmax, "
                                 "K3.1's indexer LayerNorm and top-k";
}

}  // namespace sluice::cuda
