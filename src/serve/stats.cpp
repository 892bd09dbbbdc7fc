// serve/stats.cpp — the server's counters and /health (serve/server_impl.h).
#include "serve/server_impl.h"

namespace sluice::serve {

void Server::Impl::record(const Outcome& out, Clock::time_point t0) {
  std::lock_guard<std::mutex> lock(mu);
  Counters& c = counters;
  if (out.gen.finish == Finish::cancelled)
    c.cancelled++;
  else
    c.completed++;
  c.prompt_tokens += uint64_t(out.gen.prompt_tokens);
  c.prompt_tokens_cached += uint64_t(out.gen.cached_tokens);
  c.completion_tokens += uint64_t(out.gen.generated_tokens);
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  c.seconds_per_job = 0.8 * c.seconds_per_job + 0.2 * s;
  c.cache_entries = cache.entries();
  c.cache_bytes = cache.bytes();
  if (model.experts) c.experts = model.experts->stats();  // read by the model's one user
}

json Server::Impl::stats() const {
  std::lock_guard<std::mutex> lock(mu);
  const Counters& c = counters;
  size_t in_line = sched.in_line();
  bool busy = generating.load();
  json j = {
      {"status", stopping ? "stopping" : "ok"},
      {"model", opt.model_id},
      {"generating", busy},
      {"waiting", in_line > 0 ? in_line - 1 : 0},
      {"queue_limit", opt.queue},
      {"requests",
       {{"received", c.requests},
        {"completed", c.completed},
        {"cancelled", c.cancelled},
        {"rejected_busy", c.rejected_busy},
        {"refused", c.refused},
        {"failed", c.failed}}},
      {"tokens",
       {{"prompt", c.prompt_tokens},
        {"prompt_cached", c.prompt_tokens_cached},
        {"prompt_computed", c.prompt_tokens - c.prompt_tokens_cached},
        {"completion", c.completion_tokens}}},
      {"state_cache", {{"entries", c.cache_entries}, {"bytes", c.cache_bytes}, {"budget", opt.state_cache_bytes}}},
  };
  const ExpertStats& e = c.experts;
  j["experts"] = {{"fetched", e.fetched},       {"bytes_read", e.bytes_read},   {"cache_hits", e.cache_hits},
                  {"bytes_hit", e.bytes_hit},   {"prefetched", e.prefetched},   {"network_bytes", e.network_bytes}};
  return j;
}

}  // namespace sluice::serve
