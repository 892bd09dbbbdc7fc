// model/options.h — how a model opens: the RAM budget and what it covers,
// reads in flight, which copy of the dense weights to read, the device, and
// the reports made while it opens. Every architecture takes the same options.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/expert_source.h"

namespace sluice {

struct Backend;
struct MemoryPlan;
struct PlacementRequest;

struct ModelOptions {
  // Bound on what the engine keeps in RAM: spine, expert cache, state, buffers.
  // 0 = a safe share of physical memory (default_ram_budget()).
  uint64_t ram_budget = 0;
  // Context length the budget reserves sequence state for.
  int max_context = 4096;
  // Reads in flight (io_uring queue depth) for expert reads and spine
  // streaming together (reader_queue_depth splits it); 0: default_queue_depth()
  // of the model's directory.
  int queue_depth = 0;
  // Read experts with plain pread and no cache (the simplest source; for comparisons).
  bool pread_experts = false;
  // Where experts missing from local disk come from (hub/http_experts.h's
  // stream_miss_filler for a stream install); empty: all experts are local.
  MissFillerFactory miss_filler;
  // Spine matrices are read (resident or streamed) in pieces of whole rows of
  // at most this many bytes; the streaming ring needs room for three.
  uint64_t spine_chunk_bytes = 64ull << 20;
  // The streaming ring when the spine does not fit (0: an eighth of what the
  // budget leaves for the spine, at most 512 MiB; never below the minimum).
  uint64_t spine_ring_bytes = 0;
  // Which copy of the spine to read: "bf16" (the shards), "lossless" (the
  // pack beside them, bit-identical), "int8"; empty: lossless when its pack
  // is there, else bf16. Asking for a pack that is not there is an error.
  std::string spine;
  // The pack file to read instead of DIR/spine.<format>.pack (a checkpoint
  // folder that cannot be written to): it must hold the format `spine` names
  // (lossless when empty) and be bound to this checkpoint, like any pack.
  std::string spine_pack;
  // Ignore DIR/stripe.json (io/stripe.h): read every expert from the shards.
  bool no_stripe = false;
  // whole_process: the whole process lives within ram_budget (the CLI's
  // contract). The plan first sets aside the process's resident memory when it
  // is made (code, libraries, heap: its baseline), the forward pass's working
  // buffers for chunks of chunk_tokens tokens (every position's logits when
  // all_logits), and extra_bytes the caller keeps beside the engine (saved
  // prefix states, bench's buffers). Off: the budget bounds the engine's parts.
  bool whole_process = false;
  // Sequence states the caller keeps besides the live one (a prefix cache),
  // reserved like it; MemoryPlan::state_reserve covers them all.
  int saved_states = 0;
  int chunk_tokens = 256;
  bool all_logits = false;
  // Rows whose logits one pass returns when more than one and not all_logits
  // (a multi-sequence pass: each sequence's rows and drafts; engine/batch.h
  // plan_batch_passes); 0: one row.
  int logit_rows = 0;
  uint64_t extra_bytes = 0;
  // Reports while the model opens (either may be empty): the memory plan once
  // it is made, then the resident spine's bytes read so far (done, total).
  std::function<void(const MemoryPlan&)> on_plan;
  // Called after on_plan with what the VRAM placement needs (model/placement.h,
  // cli/vram_option.h); true: announce the RAM-resident spine to the backend
  // as host memory it may read weights from (the CUDA entry pins it: the
  // placement chose --gpu-spill split).
  std::function<bool(const PlacementRequest&)> on_placement;
  std::function<void(uint64_t done, uint64_t total)> load_progress;
  // Open a model whose config keys or tensors the engine does not implement
  // (checkpoint/checkpoint.h): each is passed to on_warning instead of refused.
  bool allow_unknown = false;
  std::function<void(const std::string&)> on_warning;
  // The op table the model computes on (kernels/backend.h; kernels/device.h
  // picks it for --device); nullptr: cpu_backend().
  const Backend* backend = nullptr;
};

uint64_t default_ram_budget();
// The queue depth for models in `dir`: what `sluice probe --save` recorded for
// its disk (io/depth_profile.h), else 16; *saved says which.
int default_queue_depth(const std::string& dir, bool* saved = nullptr);
// Reads in flight for each of the engine's readers: a queue depth is the
// device's, so when the spine streams beside the experts its loader and the
// expert reader share it (half each); with the spine resident the expert
// reader has it all. Two readers at the full depth each put twice the device's
// depth in flight: on the H200 machine's disk the 4G streamed k3-slice read at
// 0.84-1.03 of the bare spine pass with 2 x 16 and 0.94-1.00 with 2 x 8
// (docs/decisions.md, "Reads: queue depth and prefetch guesses").
int reader_queue_depth(int depth, bool spine_streams);
// The process's resident set now (/proc/self/statm), in bytes; 0 if unknown.
uint64_t resident_bytes();

}  // namespace sluice
