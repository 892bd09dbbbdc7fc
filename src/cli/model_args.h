// cli/model_args.h — the options every command that opens a model shares, and
// opening it with progress on stderr.
//
//   -m, --model DIR      the model directory
//   --ram-budget SIZE    bound on the whole process's memory (base/bytes.h units)
//   -c, --ctx-size N     the context the memory plan reserves sequence state for
//   -t, --threads N      kernel thread pool size (default: every CPU this process may use)
//   --spine bf16|lossless|int8   which copy of the spine to read (cli/spine_option.h)
//   --spine-pack FILE            that copy's pack, when it is not beside the shards
//   --no-stripe          read the experts from the shards, not the drives of DIR/stripe.json
//   --device cpu|cuda|auto       where the arithmetic runs (kernels/device.h; default auto:
//                                the GPU when the build has CUDA and one is usable)
// A command adds them with one call, add_model_options(sub, args).
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "arch/open.h"
#include "cli/vram_option.h"

namespace sluice::cli {

struct ModelArgs {
  std::string dir, ram_budget;
  std::string spine;  // --spine: bf16|lossless|int8, empty: the exact default
  std::string spine_pack;  // --spine-pack: the pack file, empty: DIR/spine.<format>.pack
  std::string device = "auto";  // --device: cpu|cuda|auto
  std::string vram_experts;     // --vram-experts SIZE: the CUDA entry's expert tier cap, empty: default
  VramArgs vram;                // --vram, --gpu-layers, --gpu-spill, --cpu-moe (cli/vram_option.h)
  int ctx_size = 0;  // 0: ModelOptions' default
  int threads = 0;   // 0: every CPU
  bool quiet = false;  // no load progress or memory plan on stderr
  bool no_stripe = false;  // --no-stripe: ignore DIR/stripe.json
  bool allow_unknown = false;  // --allow-unknown: open a model with features the engine lacks, warning
};

// --allow-unknown, for every command that opens a model.
void add_allow_unknown_option(CLI::App& sub, bool& allow);
// Opens DIR as a checkpoint; with allow_unknown, each ignored feature is warned about on stderr.
Checkpoint open_checkpoint_warning(const std::string& dir, bool allow_unknown);
// Prints "sluice: warning: <message>" on stderr.
void print_warning(const std::string& message);

void add_model_options(CLI::App& sub, ModelArgs& a);

// The ModelOptions the flags ask for, with the device, load progress and the
// memory plan reported on stderr unless quiet; sets the kernel pool size as a
// side effect. An Error for --device cuda without a CUDA build or a GPU.
ModelOptions model_options(const ModelArgs& a);

// A CLI11 transform for a numeric byte-size option: reads "512M", "16G", "16GB"
// (base/bytes.h) and hands CLI11 the number of bytes.
CLI::Validator byte_size(const std::string& flag, bool allow_zero = false);

// "budget 16.0 MiB: spine 9.50 MiB resident of 9.50 MiB, ..." — one line.
std::string describe_plan(const MemoryPlan& p, int ctx);
// Without --ram-budget, what the budget was taken from (RAM, or a container's
// cgroup limit), as " (no --ram-budget: 3/4 of ...)"; "" with one.
std::string budget_basis(const ModelArgs& a);

}  // namespace sluice::cli
