#include "cli/vram_option.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "base/bytes.h"
#include "kernels/device.h"
#include "model/placement.h"

namespace sluice::cli {

void add_vram_options(CLI::App& sub, VramArgs& a) {
  sub.add_option("--vram", a.vram,
                 "With the GPU: what may be in use on it, e.g. 24G (the context and anything else on the card "
                 "count); the plan splits it among scratch, state, the spine's first layers and the expert tier");
  sub.add_option("--gpu-layers", a.gpu_layers, "With the GPU: only the spine of layers < N in VRAM (N > layers: the head too)")
      ->check(CLI::Range(0, 1 << 20));
  sub.add_option("--gpu-spill", a.gpu_spill,
                 "With the GPU: a matrix it does not hold is computed by the CPU from RAM (cpu), uploaded for every "
                 "call (upload), or both at once on shares of its rows, the GPU's over the bus from pinned RAM "
                 "(split); default: cpu or upload, the faster by the rates measured at the start")
      ->check(CLI::IsMember({"cpu", "upload", "split"}));
  sub.add_option("--gpu-share", a.gpu_share,
                 "With --gpu-spill split: the GPU's share of the rows (default: measured over the first products)")
      ->check(CLI::Range(0.01, 0.95));
  sub.add_flag("--cpu-moe", a.cpu_moe, "With the GPU: routed experts are computed by the CPU where they lie");
}

uint64_t default_vram(const VramNow& now) { return now.total - std::min<uint64_t>(now.total, uint64_t(2) << 30); }

GpuRates gpu_rates_of(const BusRates& b) {
  GpuRates g;
  if (!b.measured) return g;
  g.pcie_gbps = b.pinned_gbs, g.staging_gbps = b.staged_gbs, g.gpu_gemv_gbps = b.gemv_gbs, g.cpu_gbps = b.cpu_gbs;
  g.crossing_s = b.call_s;
  if (b.cpu_gbs > 0 && b.cpu_beside_dma_gbs > 0) g.split_cpu_keeps = std::min(1.0, b.cpu_beside_dma_gbs / b.cpu_gbs);
  if (b.pinned_gbs > 0 && b.dma_beside_cpu_gbs > 0) g.split_bus_keeps = std::min(1.0, b.dma_beside_cpu_gbs / b.pinned_gbs);
  return g;
}

std::string describe_bus_rates(const BusRates& b) {
  char s[400];
  std::snprintf(s, sizeof s,
                "GPU GEMV %.0f GB/s; host → device %.1f GB/s pinned, %.1f GB/s from pageable RAM; the CPU's matvec "
                "%.1f GB/s; at once %.1f and %.1f GB/s (DMA, CPU); a GPU call %.0f us",
                b.gemv_gbs, b.pinned_gbs, b.staged_gbs, b.cpu_gbs, b.dma_beside_cpu_gbs, b.cpu_beside_dma_gbs,
                b.call_s * 1e6);
  return s;
}

void apply_vram_options(const VramArgs& a, bool quiet, bool expert_tier_given, ModelOptions& o) {
  if (!a.given()) return;
  const uint64_t vram = a.vram.empty() ? 0 : parse_byte_size(a.vram, "--vram");  // bad input: an error on any device
  if (!o.backend || std::strcmp(o.backend->name, "cuda") != 0) {
    std::fprintf(stderr, "sluice: note: --vram, --gpu-layers, --gpu-spill and --cpu-moe are ignored with the CPU "
                         "(--device cpu, or no GPU)\n");
    return;
  }
  const Backend* backend = o.backend;
  o.on_placement = [a, vram, quiet, expert_tier_given, backend](const PlacementRequest& request) {
    const VramNow now = vram_now(*backend);
    PlacementRequest r = request;
    r.vram = vram ? vram : default_vram(now);
    r.overhead = now.used;  // the context and modules, and whatever else is on the card now
    r.gpu_layers = a.gpu_layers;
    r.cpu_moe = a.cpu_moe;
    r.upload_spill = a.gpu_spill == "upload";
    r.split_spill = a.gpu_spill == "split";
    r.spill_by_rates = a.gpu_spill.empty();  // the fastest of cpu, upload and split by the rates
    // Measured now, so that the run decides as `sluice plan` does (else its
    // rules: experts the tier misses on the GPU unless --cpu-moe, the CPU
    // computes what the GPU does not hold).
    const BusRates bus = [&] {
      const uint64_t margin = uint64_t(64) << 20;  // the process's own growth meanwhile
      try {
        return measure_bus_rates(*backend, r.vram > now.used ? r.vram - now.used : 0,
                                 r.host_room > margin ? r.host_room - margin : 0);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sluice: note: the GPU's rates were not measured (%s): the placement follows its rules\n",
                     e.what());
        return BusRates{};
      }
    }();
    const GpuRates rates = gpu_rates_of(bus);
    const Placement p = plan_placement(r, rates);
    VramLimits l;
    l.budget = int64_t(p.vram);
    l.spine = int64_t(p.spine_gpu);
    l.state = int64_t(p.state);
    l.scratch = int64_t(p.scratch);
    l.cpu_spill = !p.upload_spill;
    l.cpu_experts = !p.experts_gpu;
    l.split_spill = p.split_spill;
    l.gpu_share = a.gpu_share;
    set_vram_limits(l);
    if (!expert_tier_given) set_vram_expert_budget(int64_t(p.tier));
    if (!quiet) {
      if (now.used > p.vram)
        std::fprintf(stderr, "sluice: warning: --vram %s is below what the card already holds (%s): the CPU computes\n",
                     format_bytes(p.vram).c_str(), format_bytes(now.used).c_str());
      std::fprintf(stderr, "sluice: placement: %s\n", describe_placement(p, r.layers).c_str());
      if (bus.measured)
        std::fprintf(stderr, "sluice: placement rates: %s; the spine's part of a step projected %.4f s\n",
                     describe_bus_rates(bus).c_str(), p.spine_gpu_s + p.spine_cpu_s + p.spine_stream_s + p.crossing_s);
    }
    return p.split_spill;  // the GPU's rows are read from the resident spine by DMA: pin it
  };
}

}  // namespace sluice::cli
