// serve/server_impl.h — the server's state, shared by its parts (internal to serve/):
//   server.cpp      construction, binding, routes, the checks before any work, the request log
//   generation.cpp  one generation request: checks, its turn, the run, the reply (whole or SSE)
//   decoder.cpp     the decode thread: the one user of the model, --parallel N generations together
//   stats.cpp       counters, /health and /metrics
#pragma once
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "engine/batch.h"
#include "engine/generate.h"
#include "serve/api.h"
#include "serve/conn_watch.h"
#include "serve/metrics.h"
#include "serve/reply.h"
#include "serve/request.h"
#include "serve/request_log.h"
#include "serve/request_memory.h"
#include "serve/response.h"
#include "serve/scheduler.h"
#include "serve/server.h"

namespace sluice::serve {

using Clock = std::chrono::steady_clock;

// How often a request waiting for its turn checks that its client is still there.
inline constexpr std::chrono::milliseconds kWaitSlice{50};
// A refused body is read and dropped (keeping the connection usable) only when this small
// and not compressed; otherwise the connection is closed unread.
inline constexpr uint64_t kDrainLimit = 64 << 10;
// How long a request waits for request memory (serve/request_memory.h) before its 503.
inline constexpr std::chrono::milliseconds kMemoryWait{2000};

inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline std::string basename_of(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

inline ApiError shutting_down() {
  return {503, "The server is shutting down.", "server_error", "", "shutting_down"};
}

inline ApiError loading() {
  return {503, "The model is still loading; retry shortly (GET /health says when it is ready).", "server_error", "",
          "model_loading"};
}

// What the request log and the metrics learn about the request being answered on
// this thread: cpp-httplib answers a connection's requests on one thread, from the
// pre-routing handler to the logger (streamed bodies included).
struct RequestContext {
  RequestLog log;
  Clock::time_point t0{};
};
inline RequestContext& request_context() {
  thread_local RequestContext c;
  return c;
}

inline void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
  RequestLog& log = request_context().log;
  log.error = e.code.empty() ? e.message : e.code;
}

// The methods a route answers ("POST", "GET, HEAD"), for a 405's Allow header; empty: no such route.
std::string allowed_methods(const std::string& path);

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
  ExpertStats experts;  // what this generation read (a difference of the source's counters)

  std::string finish_reason() const {
    if (!tool_calls.empty()) return "tool_calls";
    return stop_matched ? "stop" : finish_reason_name(gen.finish);
  }
};

// Retries of a running non-streaming request (the same key and body) wait for its
// reply instead of starting a second generation.
struct SharedReply {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int status = 0;
  std::string body;
  int waiters = 0;            // retries attached
  std::atomic<bool> owner_gone{false};
};

// One generation handed from its request's thread to the decode thread. The
// decode thread runs on_token (text, stop sequences: cheap and in order, so a
// stop ends the generation on the very token it does alone) and queues the
// text; the request's thread writes it to the client, so a slow client never
// holds up the others' pass.
struct Running {
  std::vector<int> prompt;
  GenerateOptions opt;
  OnToken on_token;
  std::atomic<bool> gone{false};  // set by the request's thread: its client left (polled by opt.cancelled)

  // Decode thread -> request thread.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Piece> pieces;
  size_t progress_done = 0, progress_total = 0;
  bool progress_new = false;
  bool done = false;
  GenerateResult result;
  std::exception_ptr error;
  ExpertStats experts_before, experts_after;  // the source's counters around it (others' reads included)
};

struct Server::Impl {
  ServerOptions opt;
  Limits lim;
  RequestMemory req_mem;  // what handling bodies may take (opt.request_memory)
  std::string fingerprint = "fp_sluice";

  // Set once by attach(); read after `ready` is seen true.
  Model* model = nullptr;
  const text::Tokenizer* tok = nullptr;
  // Owned by the decode thread (decoder.cpp) once it runs.
  std::unique_ptr<PrefixCache> cache;
  std::unique_ptr<Batch> batch;
  DraftStore drafts;  // recent outputs, drafted from by later requests
  std::atomic<bool> ready{false};
  std::string loading_phase = "starting";  // guarded by mu

  httplib::Server http;
  Scheduler sched;
  ConnWatch watch;
  Metrics metrics;

  std::atomic<bool> stopping{false}, cancel{false}, generating{false};
  int bound_port = -1;
  int listen_fd = -1;
  const int64_t started = unix_now();
  const Clock::time_point t_started = Clock::now();

  mutable std::mutex mu;  // guards the counters, the id generator, loading_phase, `running`
  Rng id_rng;
  struct Counters {
    uint64_t requests = 0, completed = 0, cancelled = 0, rejected_busy = 0, refused = 0, failed = 0, deduplicated = 0;
    uint64_t prompt_tokens = 0, prompt_tokens_cached = 0, completion_tokens = 0;
    double seconds_per_job = 1.0;  // moving average, for Retry-After
    size_t cache_entries = 0;
    uint64_t cache_bytes = 0;
    ExpertStats experts;  // the model's expert source, after the last generation
  } counters;
  std::map<std::string, std::shared_ptr<SharedReply>> running;  // non-streaming requests by dedup key

  // The decode thread and its inbox (decoder.cpp).
  std::thread decoder;
  std::mutex inbox_mu;
  std::condition_variable inbox_cv;
  std::deque<std::shared_ptr<Running>> inbox;
  bool decoder_stop = false;
  std::atomic<int> active{0};  // generations in the batch
  Batch::Stats batch_stats;    // guarded by mu: the batch's, after its latest step

  explicit Impl(ServerOptions o);
  ~Impl();
  void attach(Model& m, const text::Tokenizer& t);

  void decode_loop();
  void start(const std::shared_ptr<Running>& r);  // decode thread: into the batch
  // Request thread: hands `r` to the decode thread and relays its pieces and
  // progress (emit, tick) until it is done; gone() is polled meanwhile.
  void generate_on_decoder(const std::shared_ptr<Running>& r, const std::function<bool(Piece&)>& emit,
                           const std::function<bool()>& gone, const std::function<void(size_t, size_t)>& tick);

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

  // The checks before any work (server.cpp): Host, then the key (unless `open`).
  void guard(const httplib::Request& req, bool open) const;
  // After a refusal before the body was read: read it (and drop it) if it is at most `drain`
  // bytes and not compressed, else close the connection unread.
  void drop_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader* reader,
                 uint64_t drain = kDrainLimit) const;
  // The longest prompt a request may have: --max-prompt-tokens, and room for a token in the context.
  uint64_t prompt_cap() const {
    return uint64_t(std::max<int64_t>(0, std::min<int64_t>(opt.max_prompt_tokens, lim.context_length - 1)));
  }
  // The decoded body, at most --max-request-bytes, paid for in `grant` (request memory)
  // before it is read; throws ApiError 413/400, or 503 when the memory did not come.
  std::string read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                        MemoryGrant& grant);
  void handle_post(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader* reader, Api api);
  void finish_request(const httplib::Request& req, const httplib::Response& res);

  json model_json() const {
    return {{"id", opt.model_id},           {"object", "model"},
            {"created", started},           {"owned_by", "sluice"},
            {"context_length", lim.context_length}, {"max_model_len", lim.context_length}};
  }

  // The HTTP server's set-up (server.cpp): routes() runs the steps below in turn.
  void routes();
  void connection_hooks();   // thread pool, socket options, request start/end, error pages
  void get_routes();         // /health, /metrics, /v1/models
  void post_routes();        // the generation APIs
  void refusal_routes();     // 404/405 for the rest, bodies dropped unread

  // Checks, tokenizes and names a request; throws ApiError.
  Job prepare(const std::string& body, Api api);
  // Refuses (ApiError 400) a prompt past --max-prompt-tokens or one that leaves no room in the
  // context for its completion; fills in the default max_tokens. `cut`: tokenizing stopped at the cap.
  void check_prompt_length(Job& job, bool cut) const;

  // A place in line, or 429 / 503.
  Ticket admit();

  int retry_after_seconds() const {
    std::lock_guard<std::mutex> lock(mu);
    double s = counters.seconds_per_job * double(opt.queue + opt.parallel) / double(opt.parallel);
    return int(std::clamp(std::ceil(s), 1.0, 3600.0));
  }

  // Runs one generation with the model (the caller holds a running ticket), on the decode thread.
  // emit() gets each piece of text as it becomes final; it returns false when
  // the client is gone, and so does gone(). tick(done, total) is called after each
  // prefill chunk (prompt tokens) and each token (0, 0), for keep-alive pings and
  // progress events. Throws what the engine throws.
  Outcome run(Job& job, const std::function<bool(Piece&)>& emit, const std::function<bool()>& gone,
              const std::function<void(size_t, size_t)>& tick);

  void record(const Outcome& out, Clock::time_point t0);
  void declare_metrics();

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

  // Takes the body and its grant: both are given back once the prompt is tokenized.
  void handle_generation(const httplib::Request& req, httplib::Response& res, std::string body, MemoryGrant grant,
                         Api api);

  // Non-streaming: wait for the turn, generate everything, then answer.
  void complete(httplib::Response& res, Job& job, Ticket ticket, int fd, const std::string& dedup_key);

  struct StreamJob {
    Job job;
    Ticket ticket;
    int fd;
  };

  // Streaming: headers now, then the turn (with pings) and the SSE events as the generation goes.
  void stream(httplib::Response& res, Job job, Ticket ticket, int fd);
  bool stream_body(StreamJob& st, httplib::DataSink& sink);

  json stats() const;
  std::string metrics_text();
};

}  // namespace sluice::serve
