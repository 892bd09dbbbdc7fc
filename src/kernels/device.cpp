#include "kernels/device.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/rate_probe.h"
#ifdef SLUICE_HAVE_CUDA
#include "kernels/cuda/backend_cuda.h"
#endif

namespace sluice {

bool cuda_built() {
#ifdef SLUICE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

namespace {

// The CUDA entry, or nullptr with *why.
const Backend* cuda_entry(std::string* why) {
#ifdef SLUICE_HAVE_CUDA
  return cuda::backend_entry(cpu_backend(), why);
#else
  *why = "this build has no CUDA (configure with -DSLUICE_CUDA=ON)";
  return nullptr;
#endif
}

}  // namespace

const Backend& device_backend(const std::string& device) {
  if (device == "cpu") return cpu_backend();
  if (device != "cuda" && device != "auto") fail("--device", "unknown device '" + device + "' (cpu, cuda or auto)");
  std::string why;
  if (const Backend* b = cuda_entry(&why)) return *b;
  if (device == "cuda") fail("--device cuda", why);
  return cpu_backend();
}

std::string describe_backend(const Backend& b) {
#ifdef SLUICE_HAVE_CUDA
  if (std::strcmp(b.name, "cuda") == 0) return "cuda: " + cuda::describe();
#endif
  // The avx512 entry has the avx2 entry's bits: said as before it was an
  // entry of its own ("cpu (avx2, avx512 kernels)"), which reports keep.
  if (std::strcmp(b.name, "avx512") == 0) return "cpu (avx2, avx512 kernels)";
  return std::string("cpu (") + b.name + ")";
}

DeviceReport device_report([[maybe_unused]] const Backend& b, [[maybe_unused]] bool measure_ceilings) {
  DeviceReport r;
#ifdef SLUICE_HAVE_CUDA
  if (std::strcmp(b.name, "cuda") != 0) return r;
  r.gpu = true;
  if (measure_ceilings) {
    const cuda::Ceilings c = cuda::measure_ceilings();
    r.hbm_read_gbs = c.hbm_read_gbs, r.h2d_pinned_gbs = c.h2d_pinned_gbs;
    r.mxfp4_gemv_gbs = c.mxfp4_gemv_gbs, r.bf16_gemv_gbs = c.bf16_gemv_gbs;
  }
  const cuda::EntryStats s = cuda::entry_stats();
  r.gpu_calls = s.gpu_calls, r.resident_weights = s.resident_weights, r.resident_bytes = s.resident_bytes;
  r.resident_bytes_peak = s.resident_bytes_peak;
  r.uploaded_bytes = s.uploaded_bytes, r.cpu_matrix_calls = s.cpu_matrix_calls;
  r.uploaded_pinned_bytes = s.uploaded_pinned_bytes, r.uploaded_staged_bytes = s.uploaded_staged_bytes;
  r.weight_bytes = s.weight_bytes;
  r.tier_hits = s.tier_hits, r.tier_misses = s.tier_misses, r.tier_evictions = s.tier_evictions;
  r.tier_bytes = s.tier_bytes, r.pinned_host_bytes = s.pinned_host_bytes;
  r.call_times = s.call_times;
  r.kda_calls = s.kda_calls, r.kda_state_hits = s.kda_state_hits;
  r.kda_state_uploaded_bytes = s.kda_state_uploaded_bytes, r.mla_calls = s.mla_calls;
  r.dsa_calls = s.dsa_calls;
  r.mla_cache_hits = s.mla_cache_hits, r.mla_cache_uploaded_bytes = s.mla_cache_uploaded_bytes;
  r.state_bytes = s.state_bytes;
  r.cpu_spill_calls = s.cpu_spill_calls, r.cpu_spill_bytes = s.cpu_spill_bytes;
  r.split_calls = s.split_calls, r.split_share = s.split_share;
  const cuda::VramUse v = cuda::vram_use();
  r.vram_total = v.total, r.vram_used = v.used, r.vram_peak = v.peak;
#endif
  return r;
}

BusRates measure_bus_rates([[maybe_unused]] const Backend& b, [[maybe_unused]] uint64_t vram_room,
                           [[maybe_unused]] uint64_t host_room) {
#ifdef SLUICE_HAVE_CUDA
  constexpr uint64_t kDma = uint64_t(128) << 20;  // the probe's DMA source, beside the CPU's matrices
  if (host_room < kBusRatesMinHostBytes) return {};
  const uint64_t cpu_bytes = std::min<uint64_t>(kernels::bytes_beyond_cache(), host_room - kDma);
  if (std::strcmp(b.name, "cuda") == 0) return cuda::measure_bus_rates(cpu_backend(), vram_room, cpu_bytes);
#endif
  return {};
}

void set_vram_expert_budget([[maybe_unused]] int64_t bytes) {
#ifdef SLUICE_HAVE_CUDA
  cuda::set_vram_experts(bytes);
#endif
}

void set_vram_limits([[maybe_unused]] const VramLimits& limits) {
#ifdef SLUICE_HAVE_CUDA
  cuda::set_vram_limits(limits);
#endif
}

VramNow vram_now([[maybe_unused]] const Backend& b) {
  VramNow n;
#ifdef SLUICE_HAVE_CUDA
  if (std::strcmp(b.name, "cuda") != 0) return n;
  const cuda::VramUse v = cuda::vram_use();
  n.total = v.total, n.used = v.used;
#endif
  return n;
}

}  // namespace sluice
