// kernels/device.h — which entry of the op table (kernels/backend.h) runs a
// model: the `--device cpu|cuda|auto` choice.
//
//   cpu   cpu_backend() (AVX2 when the CPU has it, else scalar)
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
           mla_cache_uploaded_bytes = 0, state_bytes = 0;
  double call_seconds = 0;  // cumulative host time inside the GPU's product calls
};
DeviceReport device_report(const Backend& b, bool measure_ceilings);

// The CUDA entry's VRAM expert tier budget (`--vram-experts`): -1 the
// default (free VRAM less a reserve), 0 off, else bytes. No effect on the CPU
// entries or in a build without CUDA.
void set_vram_expert_budget(int64_t bytes);

}  // namespace sluice
