// sluice plan — what the engine would keep in RAM for DIR under a budget, what
// a token would read, and the I/O floor of a decode step.
//   sluice plan --model DIR --ram 64G --disk-gbps 7 [--spine bf16|lossless] [--hit-rate H]
// The plan is plan_memory()'s (k3/model.h), the one open_model() follows.
#include <cstdio>
#include <string>

#include "base/bytes.h"
#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/spine_option.h"
#include "cli/token_list.h"
#include "k3/model.h"

namespace sluice::cli {
namespace {

struct PlanArgs {
  std::string model, ram, spine;
  double disk_gbps = 7, hit_rate = 0;
  int max_context = 4096;
};

double gb(uint64_t b) { return double(b) / 1e9; }

int run_plan(const PlanArgs& a) {
  const Checkpoint ck = open_checkpoint(a.model);
  ModelOptions o;
  o.ram_budget = a.ram.empty() ? 0 : parse_byte_size(a.ram, "--ram");
  o.spine = a.spine;
  o.max_context = a.max_context;
  Spine spine(ck, o.spine_chunk_bytes, open_spine_pack(ck, o.spine));
  const MemoryPlan p = plan_memory(ck, spine, o);
  const ModelConfig& c = ck.config;
  uint64_t streamed = 0, total_read = 0;
  for (int i = 0; i < spine.piece_count(); i++) {
    total_read += spine.piece_read_bytes(i);
    if (!p.resident_pieces[size_t(i)]) streamed += spine.piece_read_bytes(i);
  }
  int moe = 0;
  for (int l = 0; l < c.num_hidden_layers; l++) moe += c.is_moe_layer(l) && c.num_experts > 0;
  const double experts = double(moe) * c.num_experts_per_token * double(c.expert_span_bytes()) * (1.0 - a.hit_rate);
  const double embed = double(c.hidden_size) * 2;
  const double per_token = double(streamed) + experts + embed;
  std::printf("model        %s (%d layers, %d MoE, top-%d of %d experts)\n", a.model.c_str(), c.num_hidden_layers, moe,
              c.num_experts_per_token, c.num_experts);
  std::printf("spine        %s: %.3f GB to read in full%s\n", spine.pack() ? "lossless pack" : "bf16 shards",
              gb(total_read), spine.pack() ? "" : " (bf16)");
  std::printf("budget       %.3f GB (working minimum %.3f GB)\n", gb(p.budget), gb(p.minimum));
  std::printf("resident     %.3f GB of spine (%s), %.3f GB vectors and routers, %.3f GB sequence state\n",
              gb(p.spine_resident_bytes), p.spine_resident ? "all of it" : "part", gb(p.fixed), gb(p.state_reserve));
  std::printf("ring         %.3f GB\n", gb(p.ring));
  std::printf("expert cache %.3f GB (+ %.3f GB in-flight buffers)\n", gb(p.expert_cache), gb(p.expert_buffers));
  std::printf("per token    spine %.3f GB, experts %.3f GB (hit rate %.2f), embedding %.6f GB\n", gb(streamed),
              experts / 1e9, a.hit_rate, embed / 1e9);
  std::printf("I/O floor    %.6f s/token at %.2f GB/s\n", per_token / (a.disk_gbps * 1e9), a.disk_gbps);
  return 0;
}

Command reg("plan", "What the engine would keep resident and read per token, and the I/O floor of a step",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<PlanArgs>();
              sub.add_option("--model", a->model, "Model directory")->required();
              sub.add_option("--ram", a->ram, "RAM budget, e.g. 64G (default: 3/4 of this machine's RAM)");
              sub.add_option("--disk-gbps", a->disk_gbps, "Disk read bandwidth in GB/s")->check(CLI::PositiveNumber);
              sub.add_option("--hit-rate", a->hit_rate, "Expected expert-cache hit rate")->check(CLI::Range(0.0, 1.0));
              sub.add_option("--max-context", a->max_context, "Context the budget reserves state for")
                  ->check(CLI::Range(1, 1 << 24));
              add_spine_option(sub, a->spine);
              *action = [a] { return run_plan(*a); };
            });

}  // namespace
}  // namespace sluice::cli
