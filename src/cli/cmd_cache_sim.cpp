// cli/cmd_cache_sim.cpp — `sluice cache-sim`: expert cache hit rates, LRU vs heat.
//
// Replays a routing trace through io/expert_cache at several budgets and
// prints the hit rate of each policy: a synthetic trace (Zipf-like popularity
// per layer, drift, next-token reuse; K3's shape by default), or with --model
// and --text-file the model's real router choices over that text. With
// --model, loading and the passes over the text show progress on stderr.
#include <cstdio>
#include <memory>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/model_args.h"
#include "cli/progress.h"
#include "cli/token_list.h"
#include "engine/routing_trace.h"
#include "hub/http_experts.h"
#include "io/expert_cache.h"
#include "model/prefetcher.h"

namespace sluice::cli {
namespace {

struct SimArgs {
  SyntheticTraceOptions trace{.layers = 92, .experts_per_layer = 896, .top_k = 16, .tokens = 1000};
  std::vector<double> budgets_percent = {1, 2, 3, 5, 10, 20};
  double half_life = ExpertCacheOptions{}.half_life_tokens;
  int window = -1;
  std::string model, text_file;
  bool allow_unknown = false;
  int ctx = 512;
  int prefetch_tokens = 0;  // > 0: decode this many tokens and report prefetch quality
  std::string ram_budget;   // for the prefetch run (the cache size decides what is read)
};

// The options of a model cache-sim opens: experts over HTTP for a stream
// install, and the spine's loading shown.
ModelOptions sim_model_options(const SimArgs& a) {
  ModelOptions opt;
  opt.allow_unknown = a.allow_unknown;
  opt.on_warning = print_warning;
  opt.miss_filler = stream_miss_filler(a.model, retry_lines("experts"));
  auto line = std::make_shared<ProgressLine>("loading spine");
  opt.load_progress = [line](uint64_t done, uint64_t total) { line->bytes(done, total); };
  return opt;
}

// Decodes the text's first tokens one at a time (a fresh sequence every ctx
// tokens), as generation does, and prints how well the engine's prefetch
// guessed each MoE layer's experts, and what wrong guesses cost.
int run_prefetch(const SimArgs& a) {
  std::vector<int> ids = tokenize_text_file(a.model, a.text_file);
  if (ids.size() > size_t(a.prefetch_tokens)) ids.resize(size_t(a.prefetch_tokens));
  ModelOptions opt = sim_model_options(a);
  if (!a.ram_budget.empty()) opt.ram_budget = parse_byte_size(a.ram_budget, "--ram-budget");
  auto m = open_model(a.model, opt);
  const ModelConfig& c = m->config();
  ModelState st = m->new_state();
  std::vector<float> logits;
  ProgressLine progress("decode");
  progress.count(0, ids.size(), "tokens");
  for (size_t i = 0; i < ids.size(); i++) {
    if (i % size_t(a.ctx) == 0) st = m->new_state();
    m->forward(st, std::span<const int>(&ids[i], 1), Logits::None, &logits);
    progress.count(i + 1, ids.size(), "tokens");
  }
  const ModelIo io = m->io();
  if (!io.prefetcher || !io.experts) fail("cache-sim", "the model has no expert reads to simulate");
  const Prefetcher& p = *io.prefetcher;
  const ExpertStats e = io.experts->stats();
  std::printf("prefetch over %zu decoded tokens of %s (expert cache %s)\n", ids.size(), a.text_file.c_str(),
              format_bytes(m->plan().expert_cache).c_str());
  std::printf("layer  recall  precision  guesses/token\n");
  for (size_t l = 0; l < p.needed.size(); l++) {
    if (!c.is_moe_layer(int(l)) || !p.needed[l]) continue;
    std::printf("%5zu  %6.3f  %9.3f  %13.1f\n", l, double(p.guessed[l]) / double(p.needed[l]),
                p.guesses[l] ? double(p.guessed[l]) / double(p.guesses[l]) : 0.0,
                double(p.guesses[l]) / double(ids.size()));
  }
  std::printf("all    %6.3f  %9.3f\n", p.recall(), p.precision());
  std::printf("reads: %llu guesses issued, %llu used, %llu withdrawn unread (%llu by a better estimate), %llu cut "
              "part-read, %llu wasted whole (%s read for nothing); %llu cache hits\n",
              (unsigned long long)e.prefetched, (unsigned long long)e.prefetch_used,
              (unsigned long long)(e.prefetch_cancelled + e.prefetch_withdrawn),
              (unsigned long long)e.prefetch_withdrawn, (unsigned long long)e.prefetch_cut,
              (unsigned long long)e.prefetch_wasted, format_bytes(e.prefetch_wasted_bytes).c_str(),
              (unsigned long long)e.cache_hits);
  return 0;
}

RoutingTrace real_trace(const SimArgs& a) {
  std::vector<int> ids = tokenize_text_file(a.model, a.text_file);
  auto m = open_model(a.model, sim_model_options(a));
  ProgressLine progress("routing");
  return routing_trace(*m, ids, a.ctx, [&](size_t done, size_t total) { progress.count(done, total, "tokens"); });
}

int run_sim(const SimArgs& a) {
  if (a.prefetch_tokens > 0) return run_prefetch(a);
  const bool real = !a.model.empty();
  RoutingTrace tr = real ? real_trace(a) : synthetic_routing_trace(a.trace);
  const double experts = double(tr.layers) * tr.experts_per_layer;
  if (real)
    std::printf("trace: %s over %s: %d layers x %d experts, top-%d, %zu tokens (router's own choices)\n",
                a.model.c_str(), a.text_file.c_str(), tr.layers, tr.experts_per_layer, tr.top_k, tr.tokens());
  else
    std::printf("trace: %d layers x %d experts, top-%d, %d tokens, zipf %.2f, reuse %.2f, drift %.3f\n",
                a.trace.layers, a.trace.experts_per_layer, a.trace.top_k, a.trace.tokens,
                a.trace.zipf_exponent, a.trace.reuse, a.trace.drift_per_token);
  std::printf("budget%%   slots    lru    heat\n");
  for (double pct : a.budgets_percent) {
    ExpertCacheOptions o;
    o.slot_bytes = 1;
    o.budget_bytes = uint64_t(pct / 100 * experts);
    o.half_life_tokens = a.half_life;
    o.window_slots = a.window;
    o.policy = CachePolicy::lru;
    CacheSimResult lru = simulate_cache(tr, o);
    o.policy = CachePolicy::heat;
    CacheSimResult heat = simulate_cache(tr, o);
    std::printf("%6.1f %8d  %.3f  %.3f\n", pct, lru.slots, lru.stats.hit_rate(),
                heat.stats.hit_rate());
    std::fflush(stdout);
  }
  return 0;
}

Command reg("cache-sim", "Compare expert cache policies (LRU vs heat) on synthetic or real routing",
            [](CLI::App& sub, Action* act) {
              auto a = std::make_shared<SimArgs>();
              sub.add_option("--layers", a->trace.layers, "MoE layers");
              sub.add_option("--experts", a->trace.experts_per_layer, "Experts per layer");
              sub.add_option("--top-k", a->trace.top_k, "Experts per token per layer");
              sub.add_option("--tokens", a->trace.tokens, "Tokens to replay");
              sub.add_option("--zipf", a->trace.zipf_exponent, "Popularity skew per layer");
              sub.add_option("--reuse", a->trace.reuse, "Chance a choice repeats the previous token's");
              sub.add_option("--drift", a->trace.drift_per_token, "Popularity swaps per layer per token");
              sub.add_option("--seed", a->trace.seed, "Trace seed");
              sub.add_option("--budgets", a->budgets_percent, "Budgets in % of all experts")
                  ->delimiter(',');
              sub.add_option("--half-life", a->half_life, "Heat half-life in tokens");
              sub.add_option("--window", a->window, "Heat recency window in slots (-1: auto)");
              auto* model = sub.add_option("-m,--model", a->model, "Replay this model's router choices ...");
              add_allow_unknown_option(sub, a->allow_unknown);
              sub.add_option("--text-file", a->text_file, "... over this text")->needs(model);
              model->needs("--text-file");
              sub.add_option("--ctx", a->ctx, "Tokens per sequence for --model")->check(CLI::PositiveNumber);
              sub.add_option("--prefetch-tokens", a->prefetch_tokens,
                             "With --model: decode this many tokens of the text and report prefetch recall, "
                             "precision and wasted reads instead")
                  ->needs(model);
              sub.add_option("--ram-budget", a->ram_budget, "With --prefetch-tokens: the engine's RAM budget")
                  ->transform(byte_size("--ram-budget"));
              *act = [a] { return run_sim(*a); };
            });

}  // namespace
}  // namespace sluice::cli
