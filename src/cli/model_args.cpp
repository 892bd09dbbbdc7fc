#include "cli/model_args.h"

#include <cstdio>

#include "base/bytes.h"
#include "base/memory_limit.h"
#include "cli/progress.h"
#include "cli/spine_option.h"
#include "hub/http_experts.h"
#include "kernels/device.h"
#include "kernels/threads.h"

namespace sluice::cli {

void add_model_options(CLI::App& sub, ModelArgs& a) {
  sub.add_option("-m,--model", a.dir, "Model directory")->required();
  sub.add_option("--ram-budget", a.ram_budget,
                 "Memory the whole process may use: 512M, 16G (GiB), 16GB (1e9 bytes) (default: 3/4 of RAM, or of the cgroup memory limit when smaller)");
  sub.add_option("-c,--ctx-size", a.ctx_size, "Context length the memory plan reserves state for (default 4096)")
      ->check(CLI::Range(1, 1 << 24));
  sub.add_option("-t,--threads", a.threads, "Kernel threads (default: every CPU)")->check(CLI::Range(1, 1024));
  add_spine_option(sub, a.spine);
  add_spine_pack_option(sub, a.spine_pack);
  sub.add_option("--device", a.device,
                 "Where the arithmetic runs: cpu, cuda, or auto (the GPU when this build has CUDA and one is usable)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_allow_unknown_option(sub, a.allow_unknown);
  sub.add_flag("--no-stripe", a.no_stripe,
               "Read the routed experts from the shards even when DIR/stripe.json lays them over several drives");
  sub.add_option("--vram-experts", a.vram_experts,
                 "With the GPU: VRAM for cached routed experts, e.g. 8G; 0: none, every expert uploaded per use "
                 "(default: the VRAM the spine leaves free, less a 2 GiB reserve)");
  add_vram_options(sub, a.vram);
}

void add_allow_unknown_option(CLI::App& sub, bool& allow) {
  sub.add_flag("--allow-unknown", allow,
               "Open a model whose config.json or tensors ask for features sluice does not implement (refused "
               "by default), with a warning naming each: its answers may be wrong");
}

void print_warning(const std::string& message) { std::fprintf(stderr, "sluice: warning: %s\n", message.c_str()); }

Checkpoint open_checkpoint_warning(const std::string& dir, bool allow_unknown) {
  Checkpoint ck = open_checkpoint(dir, {.allow_unknown = allow_unknown});
  for (const std::string& f : ck.ignored_features) print_warning(ignored_feature_warning(dir, f));
  return ck;
}

CLI::Validator byte_size(const std::string& flag, bool allow_zero) {
  return CLI::Validator(
      [flag, allow_zero](std::string& in) {
        try {
          in = std::to_string(parse_byte_size(in, flag, allow_zero));
          return std::string();
        } catch (const std::exception& e) {
          std::string m = e.what();  // CLI11 puts the option's name in front itself
          if (m.rfind(flag + ": ", 0) == 0) m.erase(0, flag.size() + 2);
          return m;
        }
      },
      "SIZE");
}

std::string budget_basis(const ModelArgs& a) {
  return a.ram_budget.empty() ? " (no --ram-budget: 3/4 of " + describe(usable_memory()) + ")" : "";
}

std::string describe_plan(const MemoryPlan& p, int ctx) {
  std::string s = "budget " + format_bytes(p.budget) + " (working minimum " + format_bytes(p.minimum) +
                  "): process baseline " + format_bytes(p.baseline) + ", working buffers " + format_bytes(p.working) +
                  ", spine ";
  if (p.spine_resident) s += format_bytes(p.spine_total) + " resident";
  else
    s += format_bytes(p.spine_resident_bytes) + " of " + format_bytes(p.spine_total) + " resident, the rest streamed "
         "through a " + format_bytes(p.ring) + " ring";
  s += "; state " + format_bytes(p.state_reserve) + " (up to " + std::to_string(ctx) + " tokens); expert buffers " +
       format_bytes(p.expert_buffers) + ", cache " + format_bytes(p.expert_cache);
  return s;
}

ModelOptions model_options(const ModelArgs& a) {
  ModelOptions o;
  o.whole_process = true;  // --ram-budget bounds the process, not only the engine
  if (!a.ram_budget.empty()) o.ram_budget = parse_byte_size(a.ram_budget, "--ram-budget");
  if (a.ctx_size > 0) o.max_context = a.ctx_size;
  o.spine = a.spine;
  o.spine_pack = a.spine_pack;
  o.allow_unknown = a.allow_unknown;
  o.no_stripe = a.no_stripe;
  o.on_warning = print_warning;
  o.miss_filler = stream_miss_filler(a.dir, retry_lines("experts"));  // experts over HTTP for a stream install
  if (a.threads > 0) kernels::set_num_threads(a.threads);
  o.backend = &device_backend(a.device);
  set_vram_expert_budget(a.vram_experts.empty() ? -1 : int64_t(parse_byte_size(a.vram_experts, "--vram-experts", true)));
  apply_vram_options(a.vram, a.quiet, !a.vram_experts.empty(), o);
  if (!a.quiet) {
    // Said with the plan, once the checkpoint has opened (a bad model stays one error line).
    const int ctx = o.max_context;
    const std::string device = describe_backend(*o.backend);
    const std::string basis = budget_basis(a);
    o.on_plan = [ctx, device, basis](const MemoryPlan& p) {
      std::fprintf(stderr, "sluice: device: %s\nsluice: memory plan: %s%s\n", device.c_str(),
                   describe_plan(p, ctx).c_str(), basis.c_str());
    };
    auto line = std::make_shared<ProgressLine>("loading spine");
    o.load_progress = [line](uint64_t done, uint64_t total) { line->bytes(done, total); };
  }
  return o;
}


}  // namespace sluice::cli
