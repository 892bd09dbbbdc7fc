// cli/plan_gpu.h — `sluice plan`'s GPU lines (issue 37): with --vram or --gpu,
// the placement model/placement.h would make on that card beside this machine's
// RAM plan, and the seconds per token it projects.
//
//   --gpu NAME        a card's figures (kGpuPresets below: VRAM, memory
//                     bandwidth, PCIe), each from its maker's datasheet;
//                     without it, this machine's card measured now as a run
//                     measures it (kernels/device.h BusRates), else a PCIe 4 card
//   --vram SIZE       the VRAM sluice may use (default: the card's)
//   --pcie-gbps R     host → device GB/s (default: the card's bus, as below)
//   --gpu-context SIZE  what the CUDA context and kernels hold (default 1G;
//                     `run`'s placement line measures it: "context")
//   --gpu-layers N, --cpu-moe, --gpu-spill cpu|upload   as `run` takes them
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "model/placement.h"

namespace sluice::cli {

struct PlanGpuArgs {
  std::string gpu, vram, spill;
  std::string context;  // --gpu-context: what the CUDA context and modules hold on the card (empty: 1G, or measured)
  double pcie_gbps = 0;
  int gpu_layers = -1;
  bool cpu_moe = false;
  bool given() const { return !gpu.empty() || !vram.empty(); }
};

void add_plan_gpu_options(CLI::App& sub, PlanGpuArgs& a);

// This machine's CPU and disk for the GPU lines.
struct PlanHostRates {
  double cpu_bf16_gbps = 0, cpu_mxfp4_gbps = 0, disk_gbps = 0, ram_hit = 0;
  double copy_gbps = 0;  // one thread's host copy (kernels::measure_copy_gbps): staged uploads; 0 not measured
};

// Prints the "placement" line (what is on the GPU, what the CPU computes) and
// the "with GPU" line (s/token, by part, beside the CPU alone and today's
// upload-per-call) on stdout. An Error for an unknown --gpu.
// `request`: the model's (model/preview.h placement_request).
void print_plan_gpu(const PlanGpuArgs& a, const PlacementRequest& request, const PlanHostRates& host);

}  // namespace sluice::cli
