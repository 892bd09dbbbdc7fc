#include "engine/bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "base/error.h"
#include "engine/session.h"
#include "store/bandwidth_probe.h"

namespace sluice {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Counters {
  uint64_t spine = 0, expert = 0, hit = 0;
  static Counters of(const Model& m) {
    ExpertStats e = m.experts->stats();
    return {m.spine->bytes_read(), e.bytes_read, e.bytes_hit};
  }
};

}  // namespace

nlohmann::json run_bench(const std::string& dir, const BenchOptions& opt) {
  if (opt.prompt_tokens < 1) fail("bench", "--prompt-tokens must be at least 1");
  if (opt.decode_tokens < 2) fail("bench", "--decode must be at least 2 (the first step is discarded)");
  const double t_open = now_s();
  auto m = open_model(dir, opt.model);
  const double open_s = now_s() - t_open;
  const ModelConfig& c = m->config();

  // A reproducible prompt of ordinary (non-special) ids.
  std::mt19937_64 rng(opt.seed);
  const int ordinary = std::max(1, std::min(c.vocab_size, c.bos_token_id > 0 ? c.bos_token_id : c.vocab_size));
  std::vector<int> prompt(static_cast<size_t>(opt.prompt_tokens));
  for (int& t : prompt) t = int(rng() % uint64_t(ordinary));

  Session s(*m);
  const Counters before = Counters::of(*m);
  const double t0 = now_s();
  int next = argmax(s.prefill(prompt));
  const double ttft = now_s() - t0;
  const Counters after_prefill = Counters::of(*m);

  std::vector<double> steps;
  Counters at_step1{};
  for (int i = 0; i < opt.decode_tokens; i++) {
    if (i == 1) at_step1 = Counters::of(*m);
    const double a = now_s();
    next = argmax(s.step(next));
    steps.push_back(now_s() - a);
  }
  const Counters end = Counters::of(*m);
  std::vector<double> steady(steps.begin() + 1, steps.end());
  std::sort(steady.begin(), steady.end());
  const double median = steady[steady.size() / 2];
  const double n = double(steady.size());
  const double spine_pt = double(end.spine - at_step1.spine) / n;
  const double expert_pt = double(end.expert - at_step1.expert) / n;
  const double hit_pt = double(end.hit - at_step1.hit) / n;
  const double bytes_pt = spine_pt + expert_pt;
  double steady_total = 0;
  for (double d : steady) steady_total += d;
  const double achieved = bytes_pt * n / steady_total / 1e9;

  // The ceiling: random O_DIRECT reads of the model's own shards, expert-sized, same queue depth.
  ProbeOptions po;
  po.read_bytes = c.num_experts > 0 ? c.expert_span_bytes() : (16ull << 20);
  po.max_seconds = opt.probe_seconds;
  po.reader.queue_depth = opt.model.queue_depth;
  ProbeResult probe = measure_read_ceiling(m->ck.shard_paths, po);

  nlohmann::json j;
  j["model"] = dir;
  j["ram_budget"] = m->plan.budget;
  j["spine_resident"] = m->plan.spine_resident;
  j["expert_cache_bytes"] = m->plan.expert_cache;
  j["queue_depth"] = opt.model.queue_depth;
  j["open_s"] = open_s;
  j["prompt_tokens"] = opt.prompt_tokens;
  j["decode_tokens"] = opt.decode_tokens;
  j["ttft_s"] = ttft;
  j["prefill_tok_s"] = double(opt.prompt_tokens) / ttft;
  j["prefill_bytes"] = {{"spine", after_prefill.spine - before.spine},
                        {"expert", after_prefill.expert - before.expert},
                        {"cache_hit", after_prefill.hit - before.hit}};
  j["decode_s_per_token"] = median;
  j["decode_steps_s"] = steps;
  j["bytes_per_token"] = {{"spine", spine_pt}, {"expert", expert_pt}, {"cache_hit", hit_pt}};
  j["achieved_gbps"] = achieved;
  j["prefetch_recall"] = m->prefetcher.recall();
  j["ceiling_gbps"] = probe.gbps;
  j["ceiling_direct"] = probe.direct;
  j["ceiling_io_uring"] = probe.io_uring;
  j["io_efficiency"] = probe.gbps > 0 ? achieved / probe.gbps : 0.0;
  j["step_over_floor"] = probe.gbps > 0 && bytes_pt > 0 ? median / (bytes_pt / (probe.gbps * 1e9)) : 0.0;
  return j;
}

}  // namespace sluice
