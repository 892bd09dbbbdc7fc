// kernels/cuda/backend_cuda.h — the CUDA entry of the op table
// (kernels/backend.h), built only with SLUICE_CUDA.
//
// On the GPU: the matrix products (matvec/matmul over bf16 and MXFP4, grouped
// MXFP4), with the kernels of cuda.h, and the KDA recurrence (kda_chunk: its
// O(D²)-per-head state update on the GPU, the conv, norms and gates on the
// host with the scalar entry's own code, kernels/kda_parts.h: bitwise the
// scalar entry), and MLA attention over the latent cache (its sums on the
// GPU in the scalar order, the softmax and gates on the host: the scalar
// entry's bits but for U_h ĉ, a GPU GEMV). Every other op is the CPU entry's
// own function (the row ops are "bitwise in every entry", which the scalar
// loops define; AttnRes, the router and the combine are small next to the
// weights they follow; the int8 spine products have no GPU kernel yet).
// describe() says which.
//
// MXFP4 products at the widths the fragment-order kernel takes (cuda.h:
// mxfp4_frag_takes; K3's experts) keep every device copy of their matrices in
// fragment order — a mirror is permuted when it is made, a tier slot when it
// is filled, a per-call upload after it lands — and run on tensor cores (their
// own family of bits, within the kernels' bound of ref). SLUICE_CUDA_MXFP4=rows
// in the environment (read when the entry is made) keeps the checkpoint's
// layout and the row kernels everywhere (to compare the two).
//
// SLUICE_CUDA_OPS=products in the environment (read when the entry is made)
// leaves the KDA recurrence and MLA attention to the CPU entry: the GPU runs
// only the products (to compare the two in one sitting; same logits within
// the products' tolerance).
//
// Sequence state stays in VRAM between calls, named by stamps (backend.h:
// StateStamp): a KDA decode step uploads no state, only its written-back host
// copy crosses the bus (4·NH·D² bytes a layer; K3: 6.3 MB); an MLA step
// uploads only its new cache rows. At most 8 GiB of copies, least recently
// used out first; a closed model's go with release(owner).
//
// Weights: owner != 0 (stable bytes) are mirrored in VRAM on first use and
// kept until release(owner) — the whole spine when it fits ("spine in
// VRAM"), leaving `reserve` bytes free; a weight that does not fit, and every
// owner == 0 weight (a ring slot, an expert buffer), is uploaded for the call
// through pinned staging (kernels/cuda/upload.h). Activations are host memory:
// copied in, the result copied out, the call returns when it is on the host.
// The entry serializes its calls (one mutex): any thread may call it.
//
// Routed experts (owner 0 with a content key, kernels/backend.h) go through
// the VRAM expert tier: a copy per key, kept across calls (least recently
// used out first; set_vram_experts). A miss is uploaded into its slot; a
// hit costs no transfer. Same kernels on the same bytes: the same bits.
// Host memory announced by register_host is pinned (cudaHostRegister) and
// uploads from it are plain DMA on the uploader's stream, fenced into the
// compute stream; other host memory goes through the pinned staging.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.h"
#include "kernels/device.h"

namespace sluice::cuda {

// The CUDA entry, created on first call with `cpu` as the fallback for the
// ops it does not run; nullptr with *why set when no device is usable.
const Backend* backend_entry(const Backend& cpu, std::string* why);

// What the entry has done so far (for --stats and the benchmark).
struct EntryStats {
  uint64_t gpu_calls = 0;       // calls run on the GPU (products, KDA, MLA)
  GpuCallTimes call_times;      // host wall time inside those calls (uploads, kernels, copies, waits), by kind
  uint64_t resident_weights = 0, resident_bytes = 0;  // VRAM mirrors now held
  uint64_t resident_bytes_peak = 0;                   // the most held at once (a closed model releases its own)
  uint64_t uploaded_bytes = 0;  // weight bytes copied per call (transient, or no VRAM left)
  uint64_t uploaded_pinned_bytes = 0, uploaded_staged_bytes = 0;  // of which straight from pinned memory / staged
  uint64_t weight_bytes = 0;    // weight bytes the GPU products read (HBM), all calls
  uint64_t tier_hits = 0, tier_misses = 0, tier_evictions = 0;  // VRAM expert tier lookups
  uint64_t tier_bytes = 0;      // VRAM the tier holds now
  uint64_t pinned_host_bytes = 0;  // host memory registered (pinned) now
  uint64_t cpu_matrix_calls = 0;  // MXFP4 products of a shape the kernels do not take (run on the CPU)
  uint64_t frag_calls = 0;        // MXFP4 product calls run in fragment order (cuda.h: mxfp4_frag_takes)
  uint64_t frag_permuted_bytes = 0;  // host-layout MXFP4 bytes permuted into fragment order per call (tier fills, uploads)
  uint64_t kda_calls = 0;         // KDA chunks run on the GPU
  uint64_t kda_state_hits = 0;    // of which found their state in VRAM (no upload)
  uint64_t kda_state_uploaded_bytes = 0;  // KDA state bytes uploaded (fresh, restored or evicted states)
  uint64_t mla_calls = 0;         // MLA attention calls run on the GPU
  uint64_t mla_cache_hits = 0;    // of which found their latent cache in VRAM (only new rows uploaded)
  uint64_t mla_cache_uploaded_bytes = 0;  // latent cache bytes uploaded
  uint64_t dsa_calls = 0;         // K3.1 indexer selections scored on the GPU
  uint64_t state_bytes = 0;       // VRAM the sequence-state copies (KDA states, MLA caches) hold now
  uint64_t cpu_spill_calls = 0;   // products the CPU entry ran on a weight the GPU does not hold (VramLimits)
  uint64_t split_calls = 0;       // products split between the GPU and the CPU (VramLimits::split_spill)
  double split_share = 0;         // the GPU's share of their rows now
  uint64_t cpu_spill_bytes = 0;   // their weight bytes
};
EntryStats entry_stats();

// The VRAM expert tier's budget in bytes (dropping what it holds): -1 (the
// default) grows into whatever VRAM is free, leaving the entry's reserve
// (2 GiB) for the spine's mirrors and scratch; 0 turns it off (every expert
// uploaded per call: the streamed case); else at most that many bytes.
void set_vram_experts(int64_t bytes);

// The VRAM placement (k3/placement.h: `--vram`, `--gpu-layers`, `--gpu-spill`,
// `--cpu-moe`). With a budget, every allocation of the entry (mirrors, tier
// blocks, state copies, the per-call arena) is made only while what is in use
// on the card (cudaMemGetInfo's total - free: the context and anything else on
// it too) stays within it; mirrors, tier and states leave `scratch` of it for
// the arena. A call whose arena does not fit runs on the CPU entry.
// (VramLimits: kernels/device.h.)
void set_vram_limits(const VramLimits& limits);
// What is in use on the card now and at most since the entry was made
// (total - free, sampled at each of the entry's allocations), its total.
struct VramUse {
  uint64_t total = 0, used = 0, peak = 0;
};
VramUse vram_use();

// The GPU's ceilings, measured now (about a second; for bench --device
// cuda): a pure-read kernel over 2 GiB (16-byte loads) and ~512 MiB of
// pinned host → device copies (21 copies of the uploader's 24 MiB staging
// block: no host memory beyond the planned), best of 3 each, in GB/s.
//
// Host memory: the entry's own (the CUDA context, every kernel module —
// loaded eagerly, CUDA_MODULE_LOADING=EAGER unless the environment says
// otherwise — the pinned staging, a first launch's driver allocations) is
// all taken when the entry is made, so a memory plan made after it counts it
// in the process's baseline (--ram-budget bounds the whole process).
// Beside them, the GEMVs the engine runs, timed on the same buffer: one K3
// decode step's gate+up experts (32 × 3072×3584 MXFP4, one grouped launch, in
// the layout the entry keeps them) and a bf16 7168×7168 GEMV, GB/s of
// weights read (their fraction of hbm_read_gbs is the kernels' figure).
struct Ceilings {
  double hbm_read_gbs = 0, h2d_pinned_gbs = 0;
  double mxfp4_gemv_gbs = 0, bf16_gemv_gbs = 0;
};
Ceilings measure_ceilings();

// BusRates (kernels/device.h), measured now (bus_rates.cu) with the CPU
// entry `cpu` for the host's side over `cpu_bytes` of matrices (64 MiB at
// least); its own stream, uploader and buffers.
BusRates measure_bus_rates(const Backend& cpu, size_t vram_room, size_t cpu_bytes);

// "NVIDIA H200 (...); GPU: <ops>; CPU (<cpu entry>): <ops>" — one line.
std::string describe();

}  // namespace sluice::cuda
