// sluice make-model — writes a seeded synthetic K3 checkpoint (tiny or real-size slice).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "checkpoint/synthetic_model.h"
#include "cli/commands.h"

namespace sluice::cli {
namespace {

struct MakeModelArgs {
  std::string preset = "tiny";
  uint64_t seed = 1;
  std::string out;
  bool force = false, dry_run = false;
  std::optional<int> hidden, layers, heads, kda_heads, kda_head_dim, q_lora, kv_lora, nope, rope, v_head, experts,
      top_k, moe_inter, latent, shared, dense_inter, block, vocab, reserved, shards;
  std::optional<double> scaling_factor;
  std::vector<int> mla_layers;
};

int run_make_model(const MakeModelArgs& a) {
  SyntheticShape s;
  if (a.preset == "tiny") {
    s = tiny_preset();
  } else if (a.preset == "k31-tiny") {
    s = k31_tiny_preset();
  } else if (a.preset == "k3-slice" || a.preset == "k31-slice") {
    if (!a.layers || !a.experts) throw Error("make-model: --preset " + a.preset + " needs --layers and --experts");
    s = a.preset == "k3-slice" ? k3_slice_preset(*a.layers, *a.experts) : k31_slice_preset(*a.layers, *a.experts);
  } else {
    throw Error("make-model: unknown preset '" + a.preset + "' (tiny, k3-slice, k31-tiny or k31-slice)");
  }
  auto set = [](int& field, const std::optional<int>& v) {
    if (v) field = *v;
  };
  set(s.hidden, a.hidden);
  set(s.layers, a.layers);
  set(s.heads, a.heads);
  set(s.kda_heads, a.kda_heads);
  set(s.kda_head_dim, a.kda_head_dim);
  set(s.q_lora, a.q_lora);
  set(s.kv_lora, a.kv_lora);
  set(s.nope, a.nope);
  set(s.rope, a.rope);
  set(s.v_head, a.v_head);
  set(s.experts, a.experts);
  set(s.top_k, a.top_k);
  set(s.moe_inter, a.moe_inter);
  set(s.latent, a.latent);
  set(s.shared, a.shared);
  set(s.dense_inter, a.dense_inter);
  set(s.block, a.block);
  set(s.vocab, a.vocab);
  set(s.reserved, a.reserved);
  // Defaults that follow other options: k3-slice puts one layer per shard (as
  // K3 does), tiny uses 3 shards (as the fixture) or fewer for fewer layers;
  // top-k shrinks with a smaller expert count.
  const bool slice = a.preset == "k3-slice" || a.preset == "k31-slice";
  s.shards = slice ? s.layers : std::min(3, s.layers);
  set(s.shards, a.shards);
  if (!a.top_k) s.top_k = std::min(s.top_k, s.experts);
  if (a.scaling_factor) s.routed_scaling_factor = *a.scaling_factor;
  s.mla_layers = a.mla_layers;  // empty: K3's rule for the chosen layer count

  SyntheticModel model = plan_synthetic_model(s, a.seed);
  std::printf("make-model: %s, %d layers, %d experts/layer, %zu shards, %llu tensors, %.3f GB, expert span %llu bytes\n",
              a.preset.c_str(), s.layers, s.experts, model.shards.size(),
              (unsigned long long)synthetic_tensor_count(model.shape), double(model.shard_bytes()) / 1e9,
              (unsigned long long)expert_span_bytes(s));
  if (a.dry_run) {
    for (const ShardPlan& sh : model.shards)
      std::printf("  %s  %llu bytes, %zu tensors\n", sh.file_name.c_str(),
                  (unsigned long long)sh.layout.file_size(), sh.tensors.size());
    return 0;
  }
  if (a.out.empty()) throw Error("make-model: --out DIR is required");

  auto t0 = std::chrono::steady_clock::now();
  WriteModelOptions opt;
  opt.overwrite = a.force;
  opt.on_file = [&](const std::string& file, uint64_t bytes) {
    double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "  %-40s %14llu bytes  %7.2f s\n", file.c_str(), (unsigned long long)bytes, at);
  };
  write_synthetic_model(model, a.out, opt);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("make-model: wrote %s in %.2f s (%.2f GB/s)\n", a.out.c_str(), secs,
              double(model.shard_bytes()) / 1e9 / std::max(secs, 1e-9));
  return 0;
}

Command reg("make-model", "Write a seeded synthetic K3 checkpoint (tiny shapes or real-size K3 layers)",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<MakeModelArgs>();
              sub.add_option("--preset", a->preset,
                             "tiny (the k3-tiny fixture's shape), k3-slice (real K3 dims), k31-tiny or k31-slice "
                             "(the same with K3.1 Pro's sparse-attention indexer)")
                  ->check(CLI::IsMember({"tiny", "k3-slice", "k31-tiny", "k31-slice"}));
              sub.add_option("--seed", a->seed, "PRNG seed: the same seed gives byte-identical files");
              sub.add_option("--out", a->out, "output directory (created; must be empty unless --force)");
              sub.add_flag("--force", a->force, "write into a non-empty directory, replacing its checkpoint");
              sub.add_flag("--dry-run", a->dry_run, "print the shard plan and sizes, write nothing");
              sub.add_option("--hidden", a->hidden, "hidden size");
              sub.add_option("--layers", a->layers, "decoder layers");
              sub.add_option("--heads", a->heads, "MLA heads");
              sub.add_option("--kda-heads", a->kda_heads, "KDA heads");
              sub.add_option("--kda-head-dim", a->kda_head_dim, "KDA head dim (key = value)");
              sub.add_option("--q-lora", a->q_lora, "MLA q_lora_rank");
              sub.add_option("--kv-lora", a->kv_lora, "MLA kv_lora_rank");
              sub.add_option("--nope", a->nope, "MLA qk_nope_head_dim");
              sub.add_option("--rope", a->rope, "MLA qk_rope_head_dim");
              sub.add_option("--v-head", a->v_head, "MLA v_head_dim");
              sub.add_option("--experts", a->experts, "routed experts per MoE layer");
              sub.add_option("--top-k", a->top_k, "experts per token");
              sub.add_option("--moe-inter", a->moe_inter, "moe_intermediate_size (multiple of 32)");
              sub.add_option("--latent", a->latent, "routed_expert_hidden_size (multiple of 32)");
              sub.add_option("--shared", a->shared, "shared experts");
              sub.add_option("--dense-inter", a->dense_inter, "dense FFN intermediate size (layer 0)");
              sub.add_option("--block", a->block, "attn_res_block_size");
              sub.add_option("--vocab", a->vocab, "vocabulary size (byte tokens + merges + reserved)");
              sub.add_option("--reserved", a->reserved, "reserved special ids at the top of the vocabulary");
              sub.add_option("--mla-layers", a->mla_layers,
                             "1-based MLA layers, comma-separated (default: multiples of 4 plus the last)")
                  ->delimiter(',');
              sub.add_option("--shards", a->shards, "shard files, layers split into contiguous groups (default: tiny 3, k3-slice one per layer)");
              sub.add_option("--scaling-factor", a->scaling_factor, "routed_scaling_factor");
              *action = [a] { return run_make_model(*a); };
            });

}  // namespace
}  // namespace sluice::cli
