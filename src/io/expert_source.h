// io/expert_source.h — where the MoE gets routed experts' bytes from.
//
// An expert is one contiguous span of the shard (checkpoint/checkpoint.h); the
// MoE asks for the spans of the experts one layer needs and computes on each as
// it becomes available. Sources differ in where bytes come from (a plain pread,
// io_uring with O_DIRECT, a RAM cache, an HTTP span cache) but never in what the
// bytes are, so the model's output never depends on the source.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "io/span_stream.h"

namespace sluice {

// What a source did, for --stats and the bench.
struct ExpertStats {
  uint64_t fetched = 0;          // expert spans handed to the MoE
  uint64_t bytes_read = 0;       // bytes read from files (alignment padding included)
  uint64_t cache_hits = 0;       // spans served from the RAM cache
  uint64_t bytes_hit = 0;        // span bytes those hits did not have to read
  uint64_t prefetched = 0;       // spans read ahead of need
  uint64_t prefetch_used = 0;    // needed spans that a prefetch had already started
  uint64_t network_bytes = 0;    // bytes fetched over HTTP (stream installs)
  uint64_t prefetch_wasted = 0;  // prefetched spans read whole that their layer did not need
  uint64_t prefetch_cancelled = 0;  // wrong guesses withdrawn before any byte was read
  uint64_t prefetch_pending = 0;    // guesses in flight when a fetch started (overlap across the boundary)
  uint64_t prefetch_withdrawn = 0;  // guesses dropped by withdraw() (a better estimate) before their read started
  uint64_t prefetch_cut = 0;        // wrong guesses stopped part-read (withdraw() or their layer's fetch)
  uint64_t prefetch_wasted_bytes = 0;  // bytes read for guesses nobody used (whole wasted spans and cut parts)
  uint64_t read_again = 0;  // needed spans read again from the shards after their stripe drive failed the read
  std::vector<uint64_t> file_bytes_read;  // per checkpoint file (a stripe's drive files among them); empty: not known
  // The expert reader's clock: time with reads in flight, reads in flight
  // integrated over time (/ wall time = mean depth), and per layer the time
  // it sat with nothing in flight before that layer's fetch (since the
  // previous fetch began): the queue drained at the layer boundary.
  uint64_t read_busy_ns = 0, read_depth_ns = 0;
  uint64_t wait_ns = 0;  // time fetches sat blocked waiting for a read (compute waiting for I/O)
  std::vector<uint64_t> idle_before_layer_ns;
  // Steady-clock times (ns) when the latest fetch of the first MoE layer
  // began and the latest fetch of any layer ended: a decode step's token
  // boundary (head, dense layers, the first MoE layer's attention and router:
  // compute with no expert read of its own to wait for) lies before the one
  // and after the other.
  uint64_t first_moe_fetch_ns = 0, last_fetch_end_ns = 0;
};

// One span an expert source read, and the layer whose fetch issued it (its
// own reads, or its prefetches for the next layer).
struct ExpertRead {
  int layer = 0;
  FileSpan span;
};

// One expert's bytes in a batch (fetch_batches): experts[i]'s span.
struct ExpertBytes {
  size_t i = 0;
  const uint8_t* span = nullptr;
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Calls use(i, span) once for each i < experts.size(), with the bytes of
  // expert experts[i] of `layer`, in any order; the span is valid during the call.
  virtual void fetch(int layer, std::span<const int> experts,
                     const std::function<void(size_t i, const uint8_t* span)>& use) = 0;
  // fetch(), and meanwhile() called once during it: where the fetch would
  // first block on a read (work that needs no expert bytes fills the wait:
  // the MoE's shared experts), or after the last use() when it never blocks.
  // Default: fetch, then meanwhile.
  virtual void fetch_overlapped(int layer, std::span<const int> experts,
                                const std::function<void(size_t i, const uint8_t* span)>& use,
                                const std::function<void()>& meanwhile) {
    fetch(layer, experts, use);
    if (meanwhile) meanwhile();
  }
  // fetch_overlapped(), handing over at once every expert whose bytes are
  // here together (the cache's hits and landed guesses first, then reads as
  // they land, those landed meanwhile in one call): each expert once, the
  // spans valid during the call. A device computes a batch in a few launches
  // instead of two per expert. Default: batches of one.
  using BatchUse = std::function<void(std::span<const ExpertBytes> batch)>;
  virtual void fetch_batches(int layer, std::span<const int> experts, const BatchUse& use,
                             const std::function<void()>& meanwhile) {
    fetch_overlapped(
        layer, experts,
        [&](size_t i, const uint8_t* span) {
          const ExpertBytes one{i, span};
          use({&one, 1});
        },
        meanwhile);
  }
  // A hint: these experts of `layer` will probably be needed soon; the reads
  // start right after the next fetch() has issued its own, behind any read a
  // fetch waits for, into cache slots or (no slot) spare read buffers. The
  // next fetch of `layer` withdraws the wrong guesses not yet started (a hint
  // for a layer already fetched is for the next pass). Wrong guesses cost
  // bandwidth, never correctness. Default: ignored.
  virtual void prefetch(int /*layer*/, std::span<const int> /*experts*/) {}
  // A weaker hint, for a later pass: read only on a drive with nothing else
  // in flight, one span at a time (several drives, io/stripe.h: a drive that
  // finished its share of a token early would otherwise wait for the
  // slowest). Ignored with one drive, where no drive idles while reads wait.
  virtual void prefetch_when_idle(int /*layer*/, std::span<const int> /*experts*/) {}
  // A better estimate for `layer` came in: its guesses not in `keep` (sorted)
  // are dropped: hints not issued forgotten, reads not started withdrawn,
  // reads under way cut short (landed ones stay: they cost nothing more).
  virtual void withdraw(int /*layer*/, std::span<const int> /*keep*/) {}
  // Lets reads progress (collects finished reads so that queued ones are
  // issued): the forward pass calls it between matrices, the MoE between an
  // expert's matrices inside fetch()'s `use`.
  virtual void pump() {}
  // A long pass (a prompt chunk) computes from long_pass(true) to
  // long_pass(false): background work of the source (faulting in cache
  // memory) waits meanwhile and leaves every core to it. Default: ignored.
  virtual void long_pass(bool /*running*/) {}
  virtual ExpertStats stats() const { return {}; }
  // While `log` is set, every span read from a local file is appended to it
  // (the bench replays a step's reads). Returns false if the source cannot.
  virtual bool record_reads(std::vector<ExpertRead>* /*log*/) { return false; }
  // The source this one asks for what is not on local disk (see
  // make_direct_expert_source), or null.
  virtual const ExpertSource* miss_filler() const { return nullptr; }
};

// Makes the source of the experts a local install lacks (hub/: a stream
// install's HTTP source); empty when every expert is on local disk.
using MissFillerFactory = std::function<std::unique_ptr<ExpertSource>(const Checkpoint&)>;

// Reads each span with pread, every time (no cache): the simplest correct source.
std::unique_ptr<ExpertSource> make_pread_expert_source(const Checkpoint& ck);

// Told of the source's read memory (its cache slots and read buffers), so a
// device backend can pin it (kernels/backend.h, register_host): added once
// each buffer is allocated and faulted in (possibly on the source's helper
// thread), removed before it is freed, when no read or use of it is under way.
struct HostMemoryHooks {
  void (*add)(void* p, size_t n) = nullptr;
  void (*remove)(void* p, size_t n) = nullptr;
};

struct DirectSourceOptions {
  uint64_t cache_bytes = 0;      // RAM for cached experts (0: no cache)
  uint64_t inflight_bytes = 0;   // RAM for reads that bypass the cache (at least one span)
  int queue_depth = 16;          // read operations in flight (on the shards' drive)
  // A stripe's drives (io/stripe.h): each checkpoint file's device (0: the
  // shards' drive, d: drive d-1; empty: all 0) and each drive's own depth.
  std::vector<int> file_devices;
  std::vector<int> device_depths;
  // The striped experts' spans in the shards ([layer][expert]; length 0: not
  // striped): a drive file that fails a read is read from there instead,
  // with a warning naming it (io/stripe.h, "a failing drive falls back").
  std::vector<std::vector<FileSpan>> shard_spans;
  bool shards_moved = false;  // stripe --move: shard_spans are holes; a failing drive falls back to other copies only
  // A stripe's other copies of each expert ([layer][expert]; empty: one copy,
  // io/stripe.h StripeUse::copy_spans): a read goes to the copy whose drive
  // would finish it first: (bytes queued + the span) / the drive's weight
  // (device_weights[d - 1] for device d; empty: all equal).
  std::vector<std::vector<std::vector<FileSpan>>> copy_spans;
  std::vector<double> device_weights;
  std::function<void(const std::string&)> on_warning;
  HostMemoryHooks host_memory;   // both or neither set
};

// io_uring + O_DIRECT reads (io/span_reader.h) into a RAM expert cache with
// learned heat (io/expert_cache.h); experts never enter the page cache. With a
// `miss_filler`, cache misses are asked of it instead of read from the shards
// (whose expert ranges are then holes), and what it returns is cached the same.
std::unique_ptr<ExpertSource> make_direct_expert_source(const Checkpoint& ck, const DirectSourceOptions& opt,
                                                        std::unique_ptr<ExpertSource> miss_filler = nullptr);

}  // namespace sluice
