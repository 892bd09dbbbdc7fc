// kernels/device.h — which entry of the op table (kernels/backend.h) runs a
// model: the `--device cpu|cuda|auto` choice.
//
//   cpu   cpu_backend() (AVX-512 or AVX2 when the CPU has it, else scalar)
//   cuda  the CUDA entry (kernels/cuda/backend_cuda.h); an Error naming why
//         when this build has no CUDA (configure with -DSLUICE_CUDA=ON) or no
//         GPU is usable
//   auto  the CUDA entry when the build has it and a GPU is usable, else cpu
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.h"

namespace sluice {

// True when this build has the CUDA entry (configured with SLUICE_CUDA).
bool cuda_built();

// The entry for a --device value; an Error for an unknown name or an
// unavailable cuda.
const Backend& device_backend(const std::string& device);

// One line: the entry's name and, for CUDA, the GPU and which ops run where.
std::string describe_backend(const Backend& b);

// Host seconds inside the GPU entry's calls, by kind (cumulative; calls()
// is their sum), with the parts that say where a call's time
// goes: its final wait for the stream, and for --gpu-spill split the CPU's
// rows (host clock) and the GPU's part (its events: the DMA and the GEMVs).
struct GpuCallTimes {
  double bf16 = 0, mxfp4 = 0, kda = 0, mla = 0, dsa = 0, split = 0;  // calls of each kind, whole
  double sync = 0;                    // of all of them: waiting in the final stream sync
  double split_cpu = 0, split_gpu = 0;  // of the split calls: the CPU's rows; the GPU's part (events)
  double calls() const { return bf16 + mxfp4 + kda + mla + dsa + split; }  // every call, whole
  GpuCallTimes minus(const GpuCallTimes& o) const {
    return {bf16 - o.bf16, mxfp4 - o.mxfp4, kda - o.kda,     mla - o.mla,
            dsa - o.dsa,   split - o.split, sync - o.sync, split_cpu - o.split_cpu, split_gpu - o.split_gpu};
  }
};

// What the entry did (for --stats and bench): zeros for the CPU entries.
// measure_ceilings: also time the GPU's HBM read and pinned host → device
// ceilings now, and the engine's MXFP4 and bf16 GEMVs at K3 shapes against
// them (about a second).
struct DeviceReport {
  bool gpu = false;
  double hbm_read_gbs = 0, h2d_pinned_gbs = 0;
  double mxfp4_gemv_gbs = 0, bf16_gemv_gbs = 0;  // the engine's GEMVs, timed with the ceilings (K3 shapes)
  uint64_t gpu_calls = 0, resident_weights = 0, resident_bytes = 0, resident_bytes_peak = 0, uploaded_bytes = 0,
           cpu_matrix_calls = 0;
  uint64_t uploaded_pinned_bytes = 0, uploaded_staged_bytes = 0, weight_bytes = 0;  // cumulative
  uint64_t tier_hits = 0, tier_misses = 0, tier_evictions = 0, tier_bytes = 0, pinned_host_bytes = 0;
  // The KDA recurrence and MLA attention on the GPU (cumulative; state bytes: held now).
  uint64_t kda_calls = 0, kda_state_hits = 0, kda_state_uploaded_bytes = 0, mla_calls = 0, mla_cache_hits = 0,
           mla_cache_uploaded_bytes = 0, state_bytes = 0, dsa_calls = 0;
  GpuCallTimes call_times;  // cumulative host time inside the GPU's calls, by kind, and their parts
  uint64_t vram_total = 0, vram_used = 0, vram_peak = 0;  // on the card: total, in use now, at most (total - free)
  uint64_t cpu_spill_calls = 0, cpu_spill_bytes = 0;     // products the CPU ran on weights the GPU does not hold
  uint64_t split_calls = 0;  // products split between the GPU and the CPU (--gpu-spill split; their CPU bytes in cpu_spill_bytes)
  double split_share = 0;    // the GPU's share of their rows now
};
DeviceReport device_report(const Backend& b, bool measure_ceilings);

// What the GPU placement (model/placement.h) plans with, measured now on
// this GPU and host (the CUDA entry; zeros and measured = false elsewhere, or
// when `vram_room`, the VRAM the probe may take, is under its 160 MiB): about
// 0.2-0.5 s, with a host buffer of 384 MiB to 1.1 GiB and 160 MiB of VRAM, both freed after.
// The pinned DMA and the CPU's matvec are also timed at once (what
// --gpu-spill split runs): they share the host's memory, so each keeps only a
// part of its rate alone.
struct BusRates {
  bool measured = false;
  double pinned_gbs = 0;          // host → device from pinned RAM (the uploader's chunks)
  double staged_gbs = 0;          // host → device from pageable RAM, through the entry's pinned staging
  double gemv_gbs = 0;            // the GPU's bf16 GEMV: weight bytes read from VRAM
  double cpu_gbs = 0;             // the CPU entry's bf16 matvec from RAM (its kernel pool)
  double cpu_beside_dma_gbs = 0;  // the same while a pinned DMA runs
  double dma_beside_cpu_gbs = 0;  // the pinned DMA while the CPU's matvec runs
  double call_s = 0;              // one GPU product call's own cost: an activation in, a launch, the result out, a sync
};
// host_room: the host memory it may take; the CPU's matrices are a working
// set beyond the last-level caches (kernels/rate_probe.h bytes_beyond_cache:
// 256 MiB to 1 GiB) where host_room holds it and the DMA's 128 MiB, else what
// it holds; under kBusRatesMinHostBytes, nothing is measured.
constexpr uint64_t kBusRatesMinHostBytes = uint64_t(384) << 20;
BusRates measure_bus_rates(const Backend& b, uint64_t vram_room, uint64_t host_room);

// The CUDA entry's VRAM expert tier budget (`--vram-experts`): -1 the
// default (free VRAM less a reserve), 0 off, else bytes. No effect on the CPU
// entries or in a build without CUDA.
void set_vram_expert_budget(int64_t bytes);

// The CUDA entry's VRAM limits (k3/placement.h chooses them: --vram,
// --gpu-layers, --gpu-spill, --cpu-moe). With a budget, every allocation of
// the entry (mirrors, tier blocks, state copies, the per-call arena) is made
// only while what is in use on the card (total - free: the context and
// anything else on it too) stays within it; mirrors, tier and states leave
// `scratch` of it for the arena. A call whose arena does not fit runs on the
// CPU entry. No effect on the CPU entries or in a build without CUDA.
struct VramLimits {
  int64_t budget = -1;       // bytes in use on the GPU at most; -1: free VRAM less the reserve (the default)
  int64_t spine = -1;        // the stable weights' mirrors at most, bytes; -1: no cap but the budget
  int64_t state = -1;        // the sequence-state copies at most; -1: the entry's cap (8 GiB)
  int64_t scratch = 0;       // kept free under the budget for the arena
  bool cpu_spill = false;    // a weight with no mirror (no room, or a streamed piece) is computed by the CPU
                             // entry from RAM (false: uploaded for the call, the old way)
  bool cpu_experts = false;  // routed experts (content-keyed) computed by the CPU entry (`--cpu-moe`)
  // With cpu_spill (`--gpu-spill split`): a bf16 matrix the GPU does not hold
  // that lies in pinned RAM is computed by both at once, its first rows by the
  // GPU after a DMA upload, the rest by the CPU (the bus adds to the CPU's
  // memory bandwidth). gpu_share: the GPU's share of the rows; 0: measured
  // over the first calls, then kept.
  bool split_spill = false;
  double gpu_share = 0;
};
void set_vram_limits(const VramLimits& limits);
// VRAM in use on the card now (total - free) and its total; zeros without the CUDA entry.
struct VramNow {
  uint64_t total = 0, used = 0;
};
VramNow vram_now(const Backend& b);

}  // namespace sluice
