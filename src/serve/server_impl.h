// serve/server_impl.h — the server's state, shared by its parts (internal to serve/):
//   server.cpp      construction, binding, routes, authorization
//   generation.cpp  one generation request: checks, its turn, the run, the reply (whole or SSE)
//   stats.cpp       counters and /health
#pragma once
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <random>

#include "engine/generate.h"
#include "serve/api.h"
#include "serve/reply.h"
#include "serve/request.h"
#include "serve/response.h"
#include "serve/scheduler.h"
#include "serve/server.h"

namespace sluice::serve {

using Clock = std::chrono::steady_clock;

// How often a request waiting for its turn checks that its client is still there.
inline constexpr std::chrono::milliseconds kWaitSlice{50};

inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::string basename_of(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

inline ApiError shutting_down() {
  return {503, "The server is shutting down.", "server_error", "", "shutting_down"};
}

inline void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
}

struct Job {
  GenerationRequest req;
  std::vector<int> prompt;
  std::vector<int> stop_ids;
  ReplyHeader head;
};

struct Outcome {
  GenerateResult gen;
  Piece last;                       // what the end of the generation released
  json tool_calls = json::array();  // chat: parsed from the reply's tools block
  int reasoning_tokens = 0;
  bool stop_matched = false;
  std::vector<int> token_ids;

  std::string finish_reason() const {
    if (!tool_calls.empty()) return "tool_calls";
    return stop_matched ? "stop" : finish_reason_name(gen.finish);
  }
};

struct Server::Impl {
  Model& model;
  const text::Tokenizer& tok;
  ServerOptions opt;
  Limits lim;
  std::string fingerprint;

  httplib::Server http;
  Scheduler sched;
  // Used only by the holder of the scheduler's front ticket.
  Session session;
  PrefixCache cache;

  std::atomic<bool> stopping{false}, cancel{false}, generating{false};
  int bound_port = -1;
  const int64_t started = unix_now();

  mutable std::mutex mu;  // guards the counters and the id generator
  Rng id_rng;
  struct Counters {
    uint64_t requests = 0, completed = 0, cancelled = 0, rejected_busy = 0, refused = 0, failed = 0;
    uint64_t prompt_tokens = 0, prompt_tokens_cached = 0, completion_tokens = 0;
    double seconds_per_job = 1.0;  // moving average, for Retry-After
    size_t cache_entries = 0;
    uint64_t cache_bytes = 0;
    ExpertStats experts;  // the model's expert source, after the last generation
  } counters;

  Impl(Model& m, const text::Tokenizer& t, ServerOptions o)
      : model(m),
        tok(t),
        opt(std::move(o)),
        sched(opt.queue),
        session(m),
        cache(opt.state_cache_bytes),
        id_rng(std::random_device{}() ^ uint64_t(unix_now())) {
    if (opt.model_id.empty()) opt.model_id = basename_of(m.ck.dir);
    lim.model_id = opt.model_id;
    lim.max_tokens = opt.max_tokens;
    lim.vocab_size = m.config().vocab_size;
    lim.context_length = m.config().max_position_embeddings;
    fingerprint = "fp_sluice";
    routes();
  }

  std::string new_id(const char* prefix) {
    std::lock_guard<std::mutex> lock(mu);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%016llx%08llx", prefix, (unsigned long long)id_rng.next(),
                  (unsigned long long)(id_rng.next() >> 32));
    return buf;
  }
  uint64_t new_seed() {
    std::lock_guard<std::mutex> lock(mu);
    return id_rng.next();
  }
  void count(uint64_t Counters::*field) {
    std::lock_guard<std::mutex> lock(mu);
    counters.*field += 1;
  }

  void authorize(const httplib::Request& req) const;

  json model_json() const {
    return {{"id", opt.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "sluice"}};
  }

  void routes();

  // Checks, tokenizes and names a request; throws ApiError.
  Job prepare(const httplib::Request& req, Endpoint ep);

  // A place in line, or 429 / 503.
  Ticket admit();

  int retry_after_seconds() const {
    std::lock_guard<std::mutex> lock(mu);
    double s = counters.seconds_per_job * double(opt.queue + 1);
    return int(std::clamp(std::ceil(s), 1.0, 3600.0));
  }

  // Runs one generation with the model (the caller holds the front ticket).
  // emit() gets each piece of text as it becomes final; it returns false when
  // the client is gone, and so does gone(). Throws what the engine throws.
  Outcome run(Job& job, const std::function<bool(Piece&)>& emit, const std::function<bool()>& gone);

  void record(const Outcome& out, Clock::time_point t0);

  Usage usage_of(const Outcome& out) const {
    Usage u;
    u.prompt_tokens = out.gen.prompt_tokens;
    u.cached_tokens = out.gen.cached_tokens;
    u.completion_tokens = out.gen.generated_tokens;
    u.reasoning_tokens = out.reasoning_tokens;
    return u;
  }

  json logprobs_json(const GenerationRequest& g, const std::vector<TokenInfo>& toks, size_t text_offset) const {
    if (!g.logprobs) return nullptr;
    return g.endpoint == Endpoint::chat ? chat_logprobs_json(toks) : completion_logprobs_json(toks, text_offset);
  }

  void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint ep);

  // Non-streaming: generate everything, then answer.
  void complete(httplib::Response& res, Job& job, int fd);

  struct StreamJob {
    Job job;
    Ticket ticket;
    int fd;
  };

  // Streaming: headers now, then the generation writes SSE chunks as it goes.
  void stream(httplib::Response& res, Job job, Ticket ticket, int fd);

  bool stream_body(StreamJob& st, httplib::DataSink& sink);

  json stats() const;
};

}  // namespace sluice::serve
