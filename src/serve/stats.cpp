// serve/stats.cpp — the server's counters, /health and /metrics (serve/server_impl.h).
#include "serve/server_impl.h"

#include "base/read_fault.h"
#include "kernels/device.h"

namespace sluice::serve {

void Server::Impl::declare_metrics() {
  Metrics& m = metrics;
  m.counter("sluice_requests_total", "Requests answered, by route and HTTP status.");
  m.counter("sluice_requests_cancelled_total", "Generations cancelled (client gone or shutdown).");
  m.counter("sluice_requests_deduplicated_total", "Retries answered with a running request's reply.");
  m.counter("sluice_prompt_tokens_total", "Prompt tokens of finished generations.");
  m.counter("sluice_prompt_cached_tokens_total", "Prompt tokens reused from saved prefix states.");
  m.counter("sluice_completion_tokens_total", "Generated tokens.");
  m.counter("sluice_bytes_read_total", "Bytes read for generations, by class (expert: expert spans from files; "
                                       "expert_cache_hit: expert bytes served from RAM; network: fetched over HTTP).");
  m.counter("sluice_expert_fetched_total", "Expert spans the MoE layers needed.");
  m.counter("sluice_expert_cache_hits_total", "Expert spans served from the RAM cache.");
  m.gauge("sluice_queue_depth", "Requests waiting for the model.");
  m.gauge("sluice_generating", "1 while a generation runs.");
  m.gauge("sluice_parallel", "Sequences the server decodes together at most (--parallel).");
  m.gauge("sluice_active_sequences", "Generations being prefilled or decoded now.");
  m.counter("sluice_decode_passes_total", "Decode passes (each over the rows of every decoding sequence).");
  m.counter("sluice_decode_rows_total", "Rows of those passes (each sequence's next token and its drafts).");
  m.counter("sluice_fused_prompt_rows_total", "Joining prompts' rows that rode in those passes.");
  m.counter("sluice_draft_proposed_total", "Draft tokens verified.");
  m.counter("sluice_draft_accepted_total", "Draft tokens accepted.");
  m.counter("sluice_weight_bytes_read_total",
            "Weight bytes read from storage by the model (streamed spine, experts, embedding rows).");
  m.gauge("sluice_model_loaded", "1 once the model is loaded.");
  m.gauge("sluice_state_cache_bytes", "Bytes held by saved prefix states.");
  m.gauge("sluice_uptime_seconds", "Seconds since the server started.");
  const std::vector<double> secs = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  m.histogram("sluice_time_to_first_token_seconds", "Arrival to the first generated token.", secs);
  m.histogram("sluice_queue_wait_seconds", "Time waiting for the model.", secs);
  m.histogram("sluice_request_duration_seconds", "Arrival to the end of the reply.", secs);
  m.histogram("sluice_decode_step_seconds", "Time between generated tokens.",
              {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  m.histogram("sluice_rows_per_pass", "Token rows per forward pass (prefill chunks, decode steps).",
              {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096});
}

void Server::Impl::record(const Outcome& out, Clock::time_point t0) {
  {
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
  }
  if (out.gen.finish == Finish::cancelled) metrics.add("sluice_requests_cancelled_total", 1);
  metrics.add("sluice_prompt_tokens_total", out.gen.prompt_tokens);
  metrics.add("sluice_prompt_cached_tokens_total", out.gen.cached_tokens);
  metrics.add("sluice_completion_tokens_total", out.gen.generated_tokens);
  metrics.add("sluice_bytes_read_total", double(out.experts.bytes_read), {{"class", "expert"}});
  metrics.add("sluice_bytes_read_total", double(out.experts.bytes_hit), {{"class", "expert_cache_hit"}});
  metrics.add("sluice_bytes_read_total", double(out.experts.network_bytes), {{"class", "network"}});
  metrics.add("sluice_expert_fetched_total", double(out.experts.fetched));
  metrics.add("sluice_expert_cache_hits_total", double(out.experts.cache_hits));
}

std::string Server::Impl::metrics_text() {
  metrics.set("sluice_queue_depth", double(sched.waiting()));
  metrics.set("sluice_generating", generating ? 1 : 0);
  metrics.set("sluice_parallel", double(opt.parallel));
  metrics.set("sluice_active_sequences", double(active.load()));
  metrics.set("sluice_model_loaded", ready ? 1 : 0);
  metrics.set("sluice_uptime_seconds", seconds_since(t_started));
  {
    std::lock_guard<std::mutex> lock(mu);
    metrics.set("sluice_state_cache_bytes", double(counters.cache_bytes));
    metrics.set("sluice_requests_deduplicated_total", double(counters.deduplicated));
  }
  return metrics.render();
}

json Server::Impl::stats() const {
  std::lock_guard<std::mutex> lock(mu);
  const double uptime = seconds_since(t_started);
  if (!ready)
    return {{"status", stopping ? "stopping" : "loading"},
            {"progress", {{"phase", loading_phase}, {"seconds", uptime}}},
            {"model", opt.model_id},
            {"version", server_version()},
            {"uptime_seconds", uptime}};
  const Counters& c = counters;
  bool busy = generating.load();
  const ReadHealth reads = read_health();
  json j = {
      {"status", stopping ? "stopping" : reads.failing ? "degraded" : "ok"},
      {"model", opt.model_id},
      {"version", server_version()},
      {"uptime_seconds", uptime},
      {"device", opt.device},
      {"device_detail", opt.device_detail},
      {"context_length", lim.context_length},
      {"generating", busy},
      {"waiting", sched.waiting()},
      {"queue_limit", opt.queue},
      {"parallel", opt.parallel},
      {"active_sequences", active.load()},
      {"decode",
       {{"passes", batch_stats.passes},
        {"rows", batch_stats.rows},
        {"fused_prompt_rows", batch_stats.prompt_rows},
        {"tokens", batch_stats.tokens},
        {"rows_per_pass", batch_stats.passes ? double(batch_stats.rows) / double(batch_stats.passes) : 0.0},
        {"tokens_per_pass", batch_stats.passes ? double(batch_stats.tokens) / double(batch_stats.passes) : 0.0},
        {"draft_proposed", batch_stats.draft_proposed},
        {"draft_accepted", batch_stats.draft_accepted}}},
      {"requests",
       {{"received", c.requests},
        {"completed", c.completed},
        {"cancelled", c.cancelled},
        {"rejected_busy", c.rejected_busy},
        {"refused", c.refused},
        {"failed", c.failed},
        {"deduplicated", c.deduplicated}}},
      {"tokens",
       {{"prompt", c.prompt_tokens},
        {"prompt_cached", c.prompt_tokens_cached},
        {"prompt_computed", c.prompt_tokens - c.prompt_tokens_cached},
        {"completion", c.completion_tokens}}},
      {"state_cache", {{"entries", c.cache_entries}, {"bytes", c.cache_bytes}, {"budget", opt.state_cache_bytes}}},
  };
  const MemoryPlan& p = model->plan();
  j["memory_plan"] = {{"budget", p.budget},
                      {"minimum", p.minimum},
                      {"fixed", p.fixed},
                      {"spine_total", p.spine_total},
                      {"spine_resident", p.spine_resident_bytes},
                      {"spine_ring", p.ring},
                      {"state_reserve", p.state_reserve},
                      {"expert_buffers", p.expert_buffers},
                      {"expert_cache", p.expert_cache}};
  // Weight reads: failing from a failed read until a forward pass succeeds.
  j["reads"] = {{"failing", reads.failing}, {"errors", reads.failures}, {"last_error", reads.last_error}};
  if (model->backend()) {  // a GPU's memory: in use on the card now, and at most (driver's total - free)
    const DeviceReport d = device_report(*model->backend(), false);
    if (d.gpu) j["vram"] = {{"total_bytes", d.vram_total}, {"used_bytes", d.vram_used}, {"peak_bytes", d.vram_peak}};
  }
  const ExpertStats& e = c.experts;
  j["experts"] = {{"fetched", e.fetched},       {"bytes_read", e.bytes_read},   {"cache_hits", e.cache_hits},
                  {"bytes_hit", e.bytes_hit},   {"prefetched", e.prefetched},   {"network_bytes", e.network_bytes}};
  return j;
}

}  // namespace sluice::serve
