#include "cli/plan_gpu.h"

#include <cstdio>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "cli/vram_option.h"
#include "kernels/device.h"
#include "model/placement.h"

namespace sluice::cli {
namespace {

// A card's figures. VRAM and memory bandwidth: the maker's datasheet. The
// GPU's GEMVs are taken at 0.85 of that bandwidth (the CUDA entry's bf16 GEMVs
// at K3's shapes ran 0.82-0.99 of the H200's measured HBM read, its MXFP4
// expert GEMVs 0.71: docs/benchmarks.md, "GPU"). Host → device, pinned:
// 55 GB/s for a PCIe 5 x16 slot (measured on the H200 here, same page), 25 GB/s
// for PCIe 4 x16 (PCIe 4 carries half PCIe 5's raw rate; rounded down).
struct GpuPreset {
  const char* name;
  double vram_gb, memory_gbps, pcie_gbps;
  const char* what;
};
constexpr GpuPreset kGpuPresets[] = {
    {"4090", 24, 1008, 25, "GeForce RTX 4090: 24 GB GDDR6X, 1008 GB/s, PCIe 4 x16"},
    {"3090", 24, 936, 25, "GeForce RTX 3090: 24 GB GDDR6X, 936 GB/s, PCIe 4 x16"},
    {"5090", 32, 1792, 55, "GeForce RTX 5090: 32 GB GDDR7, 1792 GB/s, PCIe 5 x16"},
    {"a6000", 48, 768, 25, "RTX A6000: 48 GB GDDR6, 768 GB/s, PCIe 4 x16"},
    {"6000ada", 48, 960, 25, "RTX 6000 Ada: 48 GB GDDR6, 960 GB/s, PCIe 4 x16"},
    {"a100", 80, 1935, 25, "A100 80GB PCIe: 80 GB HBM2e, 1935 GB/s, PCIe 4 x16"},
    {"h100", 80, 3350, 55, "H100 SXM: 80 GB HBM3, 3350 GB/s, PCIe 5 x16"},
    {"h200", 141, 4800, 55, "H200: 141 GB HBM3e, 4800 GB/s, PCIe 5 x16"},
};
constexpr double kGemvOfBandwidth = 0.85;
// Without --gpu: a PCIe 4 card at the 4090's memory bandwidth.
constexpr GpuPreset kGeneric = {"", 24, 1008, 25, "no --gpu: a PCIe 4 x16 card at 1008 GB/s (the 4090's figures)"};

const GpuPreset& find_preset(const std::string& name) {
  if (name.empty()) return kGeneric;
  for (const GpuPreset& g : kGpuPresets)
    if (name == g.name) return g;
  std::string known;
  for (const GpuPreset& g : kGpuPresets) known += std::string(known.empty() ? "" : ", ") + g.name;
  fail("--gpu", "unknown card '" + name + "' (" + known + ")");
}

// The choices plan takes as run does (--gpu-layers, --cpu-moe, --gpu-spill).
void set_choices(const PlanGpuArgs& a, const PlanHostRates& host, PlacementRequest& r) {
  r.ram_hit = host.ram_hit;
  r.gpu_layers = a.gpu_layers;
  r.cpu_moe = a.cpu_moe;
  r.upload_spill = a.spill == "upload";
  r.split_spill = a.spill == "split";
  r.spill_by_rates = a.spill.empty();  // the faster of the CPU and the bus, by the rates
}

void print_placement(const PlacementRequest& r, const GpuRates& rates, const PlanHostRates& host) {
  const Placement pl = plan_placement(r, rates);
  std::printf("placement    %s\n", describe_placement(pl, r.layers).c_str());
  std::printf("with GPU     %s (CPU %.1f GB/s bf16, %.1f GB/s MXFP4, one thread's copy %.1f GB/s; disk %.2f GB/s; "
              "RAM hit rate %.2f)\n",
              describe_projection(pl).c_str(), host.cpu_bf16_gbps, host.cpu_mxfp4_gbps, host.copy_gbps, host.disk_gbps,
              host.ram_hit);
}

// This machine's card: its rates measured now as a run measures them
// (kernels/device.h BusRates), the CPU's and the disk's the plan's own.
void print_plan_this_gpu(const PlanGpuArgs& a, const PlacementRequest& request, const PlanHostRates& host,
                         const Backend& gpu, const VramNow& now) {
  PlacementRequest r = request;
  r.vram = a.vram.empty() ? default_vram(now) : parse_byte_size(a.vram, "--vram");
  r.overhead = a.context.empty() ? now.used : parse_byte_size(a.context, "--gpu-context", true);
  set_choices(a, host, r);
  const BusRates bus = measure_bus_rates(gpu, r.vram > now.used ? r.vram - now.used : 0, UINT64_MAX);
  GpuRates rates = gpu_rates_of(bus);
  if (a.pcie_gbps > 0) rates.pcie_gbps = a.pcie_gbps;
  rates.cpu_gbps = host.cpu_bf16_gbps, rates.cpu_mxfp4_gbps = host.cpu_mxfp4_gbps, rates.disk_gbps = host.disk_gbps;
  if (!bus.measured) {  // no room on the card for the probe: the generic card's figures
    rates.gpu_gemv_gbps = kGeneric.memory_gbps * kGemvOfBandwidth, rates.pcie_gbps = kGeneric.pcie_gbps;
    rates.staging_gbps = host.copy_gbps;
  }
  std::printf("gpu          this machine's, %s; --vram %.1f GB; %s\n", describe_backend(gpu).c_str(), double(r.vram) / 1e9,
              bus.measured ? ("measured now: " + describe_bus_rates(bus)).c_str()
                           : "not measured (no room for the probe): a PCIe 4 card's figures");
  print_placement(r, rates, host);
}

}  // namespace

void add_plan_gpu_options(CLI::App& sub, PlanGpuArgs& a) {
  std::string names;
  for (const GpuPreset& g : kGpuPresets) names += std::string(names.empty() ? "" : ", ") + g.name;
  std::vector<std::string> known;
  for (const GpuPreset& g : kGpuPresets) known.push_back(g.name);
  sub.add_option("--gpu", a.gpu,
                 "Project with this card beside the RAM: " + names +
                     " (datasheet figures; default: this machine's card, measured now, else a PCIe 4 card)")
      ->check(CLI::IsMember(known));
  sub.add_option("--vram", a.vram, "VRAM sluice may use on the card, e.g. 24G (default: the --gpu card's)");
  sub.add_option("--pcie-gbps", a.pcie_gbps, "Host → device GB/s (default: the card's bus: 25 PCIe 4, 55 PCIe 5)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--gpu-context", a.context,
                 "VRAM the CUDA context and kernels hold (default: 1G, or what this machine's card holds now; run's "
                 "placement line says)");
  sub.add_option("--gpu-layers", a.gpu_layers, "Only the spine of layers < N in VRAM (as run's)")->check(CLI::Range(0, 1 << 20));
  sub.add_flag("--cpu-moe", a.cpu_moe, "Routed experts computed by the CPU (as run's)");
  sub.add_option("--gpu-spill", a.spill,
                 "cpu, upload or split: a matrix the GPU does not hold (as run's; default: the faster of cpu and "
                 "upload by the rates)")
      ->check(CLI::IsMember({"cpu", "upload", "split"}));
}

void print_plan_gpu(const PlanGpuArgs& a, const PlacementRequest& request, const PlanHostRates& host) {
  // No --gpu: this machine's card when it has one (and this build CUDA), measured now.
  const Backend& here = a.gpu.empty() ? device_backend("auto") : cpu_backend();
  const VramNow now = vram_now(here);
  if (now.total > 0) return print_plan_this_gpu(a, request, host, here, now);
  const GpuPreset& g = find_preset(a.gpu);
  PlacementRequest r = request;
  r.vram = a.vram.empty() ? uint64_t(g.vram_gb * 1e9) : parse_byte_size(a.vram, "--vram");
  r.overhead = parse_byte_size(a.context.empty() ? "1G" : a.context, "--gpu-context", true);
  set_choices(a, host, r);
  GpuRates rates;
  rates.pcie_gbps = a.pcie_gbps > 0 ? a.pcie_gbps : g.pcie_gbps;
  rates.gpu_gemv_gbps = g.memory_gbps * kGemvOfBandwidth;
  rates.cpu_gbps = host.cpu_bf16_gbps, rates.cpu_mxfp4_gbps = host.cpu_mxfp4_gbps, rates.disk_gbps = host.disk_gbps;
  rates.staging_gbps = host.copy_gbps;
  std::printf("gpu          %s; --vram %.1f GB; GEMVs at %.0f GB/s (%.2f of its memory bandwidth), host → device "
              "%.1f GB/s%s\n",
              g.what, double(r.vram) / 1e9, rates.gpu_gemv_gbps, kGemvOfBandwidth, rates.pcie_gbps,
              a.pcie_gbps > 0 ? " (--pcie-gbps)" : "");
  print_placement(r, rates, host);
}

}  // namespace sluice::cli
