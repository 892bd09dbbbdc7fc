// cli/vram_option.h — the GPU placement flags every command that opens a model
// shares (run, logits, bench, serve, perplexity), and applying them:
//
//   --vram SIZE          what may be in use on the GPU (model/placement.h splits it)
//   --gpu-layers N       only layers < N of the spine in VRAM (llama.cpp's -ngl)
//   --gpu-spill cpu|upload|split  a matrix the GPU does not hold: computed by
//                        the CPU from RAM, uploaded per call (the old way), or
//                        both at once on shares of its rows (split: the
//                        resident spine pinned, the GPU's rows by DMA);
//                        default: the faster of cpu and upload by the rates
//   --gpu-share F        split: the GPU's share (default: measured at run time)
//   --cpu-moe            routed experts computed by the CPU where they lie
// The placement decides with the GPU's and host's rates measured as the model
// opens (kernels/device.h BusRates, ~0.2 s), as `sluice plan` does with its
// figures; printed on stderr beside the placement line.
// With none of them the CUDA entry works as before (mirrors while VRAM is
// free less its reserve, the rest uploaded per call). With --device cpu they
// are ignored, with a note.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "kernels/device.h"
#include "model/options.h"
#include "model/placement.h"

namespace sluice::cli {

struct VramArgs {
  std::string vram;            // empty: not given
  int gpu_layers = -1;         // -1: the plan picks
  std::string gpu_spill;       // cpu|upload|split, empty: cpu
  double gpu_share = 0;        // --gpu-share (split): 0 measured
  bool cpu_moe = false;
  bool given() const { return !vram.empty() || gpu_layers >= 0 || !gpu_spill.empty() || cpu_moe || gpu_share > 0; }
};

void add_vram_options(CLI::App& sub, VramArgs& a);

// --vram when not given: the card's total less a 2 GiB reserve (the desktop, other users).
uint64_t default_vram(const VramNow& now);

// The placement's rates (model/placement.h) from those measured on this GPU
// and host (kernels/device.h); unmeasured: all zeros (the placement's rules).
GpuRates gpu_rates_of(const BusRates& b);
// "GPU GEMV 2900 GB/s; host → device 54.1 GB/s pinned, ...; a GPU call 31 us": one line.
std::string describe_bus_rates(const BusRates& b);

// Sets o.on_placement when the flags ask for a placement on a GPU entry
// (o.backend): it plans (model/placement.h), hands the CUDA entry its limits, and
// prints "sluice: placement: ..." on stderr unless quiet. expert_tier_given:
// --vram-experts was given (the tier is then its, not the plan's).
void apply_vram_options(const VramArgs& a, bool quiet, bool expert_tier_given, ModelOptions& o);

}  // namespace sluice::cli
