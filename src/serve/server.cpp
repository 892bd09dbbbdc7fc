#include "serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>

#include "base/error.h"
#include "engine/generate.h"
#include "serve/api.h"
#include "serve/reply.h"
#include "serve/scheduler.h"
#include "serve/socket.h"
#include "text/chat.h"

namespace sluice::serve {

namespace {

using Clock = std::chrono::steady_clock;

// How often a request waiting for its turn checks that its client is still there.
constexpr std::chrono::milliseconds kWaitSlice{50};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string basename_of(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

ApiError shutting_down() {
  return {503, "The server is shutting down.", "server_error", "", "shutting_down"};
}

void send_error(httplib::Response& res, const ApiError& e) {
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

}  // namespace

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
  DraftStore drafts;  // recent outputs, drafted from by later requests

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

  void authorize(const httplib::Request& req) const {
    if (opt.api_key.empty()) return;
    std::string auth = req.get_header_value("Authorization");
    if (auth.empty())
      throw ApiError{401,
                     "You didn't provide an API key. You need to provide your API key in an Authorization header "
                     "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                     "invalid_request_error", "", "missing_api_key"};
    const std::string want = "Bearer " + opt.api_key;
    // Compare every byte, so the time taken says nothing about the key.
    unsigned diff = auth.size() != want.size();
    for (size_t i = 0; i < auth.size(); i++) diff |= unsigned(auth[i]) ^ unsigned(want[i % want.size()]);
    if (diff) throw ApiError{401, "Incorrect API key provided.", "invalid_request_error", "", "invalid_api_key"};
  }

  json model_json() const {
    return {{"id", opt.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "sluice"}};
  }

  void routes() {
    // Waiting requests hold a thread each; the spare ones answer 429s, /health and
    // idle keep-alive connections meanwhile.
    http.new_task_queue = [n = size_t(opt.queue) + 1 + 64] { return new httplib::ThreadPool(n); };
    http.set_payload_max_length(opt.max_request_bytes);
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          ApiError e;
          e.status = res.status;
          if (res.status == 404) {
            e.message = "Invalid URL (" + req.method + " " + req.path + ")";
          } else if (res.status == 413) {
            e.message = "The request body is larger than this server accepts (" +
                        std::to_string(opt.max_request_bytes) + " bytes, --max-request-bytes).";
            e.code = "request_too_large";
          } else {
            e.message = "HTTP error " + std::to_string(res.status) + ".";
            if (res.status >= 500) e.type = "server_error";
          }
          res.set_content(dump(error_body(e)), "application/json");
          return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      send_error(res, ApiError{500, "Internal server error.", "server_error", "", ""});
    });

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump(stats()), "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        authorize(req);
        res.set_content(dump({{"object", "list"}, {"data", json::array({model_json()})}}), "application/json");
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    });
    http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        authorize(req);
        if (req.matches[1] != opt.model_id)
          throw ApiError{404, "The model '" + std::string(req.matches[1]) + "' does not exist.",
                         "invalid_request_error", "model", "model_not_found"};
        res.set_content(dump(model_json()), "application/json");
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generation(req, res, Endpoint::chat);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generation(req, res, Endpoint::completions);
    });
  }

  // Checks, tokenizes and names a request; throws ApiError.
  Job prepare(const httplib::Request& req, Endpoint ep) {
    authorize(req);
    check_json_depth(req.body, 64);
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded())
      throw ApiError{400,
                     "We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
                     "your HTTP library correctly. The OpenAI API expects a JSON payload.)",
                     "invalid_request_error", "", "invalid_json"};
    Job job;
    job.req = ep == Endpoint::chat ? parse_chat_request(body, lim) : parse_completion_request(body, lim);
    GenerationRequest& g = job.req;
    try {
      if (ep == Endpoint::chat) {
        text::ChatOptions co;
        co.thinking = g.thinking;
        co.reasoning_effort = g.reasoning_effort;
        co.tools = g.tools;
        co.tool_choice = g.tool_choice;
        co.response_format = g.response_format;
        job.prompt = text::render_chat(tok, g.messages, co);
      } else if (g.prompt_is_text) {
        // A raw interface: special-token spellings in the prompt are the tokens.
        job.prompt = tok.encode(g.prompt_text, /*allow_special=*/true);
      } else {
        job.prompt = g.prompt_ids;
      }
      if (!g.ignore_eos) job.stop_ids = text::chat_stop_ids(tok);
    } catch (const Error& e) {
      refuse(ep == Endpoint::chat ? "messages" : "prompt", e.what());
    }
    if (job.prompt.empty()) refuse("prompt", "The prompt is empty.");
    const int64_t room = lim.context_length - int64_t(job.prompt.size());
    if (g.max_tokens == 0) g.max_tokens = int(std::min<int64_t>(ep == Endpoint::chat ? opt.max_tokens : 16, room));
    if (room < 1 || g.max_tokens > room)
      throw ApiError{400,
                     "This model's maximum context length is " + std::to_string(lim.context_length) +
                         " tokens. However, you requested " + std::to_string(job.prompt.size() + size_t(g.max_tokens)) +
                         " tokens (" + std::to_string(job.prompt.size()) + " in the prompt, " +
                         std::to_string(g.max_tokens) + " for the completion).",
                     "invalid_request_error", "messages", "context_length_exceeded"};
    if (!g.seed_given) g.sampling.seed = new_seed();
    job.head.id = new_id(ep == Endpoint::chat ? "chatcmpl-" : "cmpl-");
    job.head.created = unix_now();
    job.head.model = opt.model_id;
    job.head.fingerprint = fingerprint;
    return job;
  }

  // A place in line, or 429 / 503.
  Ticket admit() {
    if (stopping) throw shutting_down();
    std::optional<Ticket> t = sched.join();
    if (t) return std::move(*t);
    if (stopping) throw shutting_down();
    count(&Counters::rejected_busy);
    ApiError e{429,
               "The server is busy: one request is generating and " + std::to_string(opt.queue) +
                   " are waiting (--queue). Retry after the time in the Retry-After header.",
               "rate_limit_error", "", "server_busy"};
    throw e;
  }

  int retry_after_seconds() const {
    std::lock_guard<std::mutex> lock(mu);
    double s = counters.seconds_per_job * double(opt.queue + 1);
    return int(std::clamp(std::ceil(s), 1.0, 3600.0));
  }

  // Runs one generation with the model (the caller holds the front ticket).
  // emit() gets each piece of text as it becomes final; it returns false when
  // the client is gone, and so does gone(). Throws what the engine throws.
  Outcome run(Job& job, const std::function<bool(Piece&)>& emit, const std::function<bool()>& gone) {
    const GenerationRequest& g = job.req;
    ReplyOptions ro;
    ro.chat = g.endpoint == Endpoint::chat;
    ro.thinking = g.thinking;
    ro.stop = g.stop;
    ro.logprobs = g.logprobs;
    ReplyBuilder reply(tok, ro);
    Piece pending;
    Outcome out;

    GenerateOptions o;
    o.max_new_tokens = g.max_tokens;
    o.sampling = g.sampling;
    o.stop_ids = job.stop_ids;
    o.logprobs = g.logprobs ? g.top_logprobs : -1;
    o.cancelled = [&] { return cancel.load() || gone(); };
    o.draft = opt.draft;
    o.draft_store = &drafts;

    generating = true;
    struct Clear {
      std::atomic<bool>& f;
      ~Clear() { f = false; }
    } clear{generating};
    out.gen = generate(session, job.prompt, o, &cache, [&](const TokenEvent& ev) {
      out.token_ids.push_back(ev.id);
      Verdict v = reply.push(ev, pending);
      if (pending.has_text()) {
        bool ok = emit(pending);
        pending = Piece{};
        if (!ok) return Verdict::cancel;
      }
      return v;
    });
    if (out.gen.finish != Finish::cancelled) reply.finish(pending);
    out.tool_calls = reply.tool_calls();
    out.reasoning_tokens = reply.reasoning_tokens();
    out.stop_matched = reply.stop_matched();
    out.last = std::move(pending);
    return out;
  }

  void record(const Outcome& out, Clock::time_point t0) {
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

  void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
    count(&Counters::requests);
    try {
      Job job = prepare(req, ep);
      Ticket ticket = admit();
      const int fd = find_connection_fd(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
      while (!ticket.wait_turn(kWaitSlice)) {
        if (stopping) throw shutting_down();
        if (peer_closed(fd)) {
          count(&Counters::cancelled);
          return;  // nobody to answer
        }
      }
      if (stopping) throw shutting_down();
      if (job.req.stream)
        stream(res, std::move(job), std::move(ticket), fd);
      else
        complete(res, job, fd);
    } catch (const ApiError& e) {
      if (e.status == 429) res.set_header("Retry-After", std::to_string(retry_after_seconds()));
      if (e.status != 429) count(&Counters::refused);
      send_error(res, e);
    } catch (const std::exception& e) {
      count(&Counters::failed);
      std::fprintf(stderr, "sluice serve: %s %s: %s\n", req.method.c_str(), req.path.c_str(), e.what());
      send_error(res, ApiError{500, std::string("Generation failed: ") + e.what(), "server_error", "", ""});
    }
  }

  // Non-streaming: generate everything, then answer.
  void complete(httplib::Response& res, Job& job, int fd) {
    const auto t0 = Clock::now();
    std::string reasoning, content;
    std::vector<TokenInfo> lps;
    auto take = [&](Piece& p) {
      reasoning += p.reasoning;
      content += p.content;
      for (auto& t : p.logprobs) lps.push_back(std::move(t));
    };
    Outcome out;
    try {
      out = run(job, [&](Piece& p) { take(p); return true; }, [&] { return peer_closed(fd); });
    } catch (...) {
      session.reset();  // a failed forward pass may have left the state half-advanced
      throw;
    }
    record(out, t0);
    if (out.gen.finish == Finish::cancelled) {
      if (cancel) throw shutting_down();
      return;  // the client left
    }
    take(out.last);
    ReplyBody b;
    b.reasoning = std::move(reasoning);
    b.content = std::move(content);
    b.has_reasoning = job.req.endpoint == Endpoint::chat && job.req.thinking;
    b.tool_calls = out.tool_calls;
    b.logprobs = logprobs_json(job.req, lps, 0);
    b.finish_reason = out.finish_reason();
    b.usage = usage_of(out);
    if (job.req.return_token_ids) {
      b.prompt_ids = &job.prompt;
      b.token_ids = &out.token_ids;
    }
    json reply = job.req.endpoint == Endpoint::chat ? chat_completion_json(job.head, b) : text_completion_json(job.head, b);
    res.set_content(dump(reply), "application/json");
  }

  struct StreamJob {
    Job job;
    Ticket ticket;
    int fd;
  };

  // Streaming: headers now, then the generation writes SSE chunks as it goes.
  void stream(httplib::Response& res, Job job, Ticket ticket, int fd) {
    auto st = std::make_shared<StreamJob>(StreamJob{std::move(job), std::move(ticket), fd});
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, st](size_t, httplib::DataSink& sink) { return stream_body(*st, sink); },
        [st](bool) { st->ticket.leave(); });
  }

  bool stream_body(StreamJob& st, httplib::DataSink& sink) {
    const auto t0 = Clock::now();
    const GenerationRequest& g = st.job.req;
    const ReplyHeader& h = st.job.head;
    const bool chat = g.endpoint == Endpoint::chat;
    bool ok = true;
    size_t text_offset = 0;
    auto send = [&](const json& j) {
      std::string event = "data: " + dump(j) + "\n\n";
      ok = ok && sink.write(event.data(), event.size());
      return ok;
    };
    auto send_piece = [&](Piece& p, const json& finish) {
      json lp = logprobs_json(g, p.logprobs, text_offset);
      if (chat) {
        json delta = json::object();
        if (!p.reasoning.empty()) delta["reasoning_content"] = p.reasoning;
        if (!p.content.empty()) delta["content"] = p.content;
        return send(chat_chunk_json(h, delta, lp, finish, g.include_usage));
      }
      text_offset += p.content.size();
      return send(completion_chunk_json(h, p.content, lp, finish, g.include_usage));
    };
    auto gone = [&] { return !ok || peer_closed(st.fd); };
    auto end_with_error = [&](const ApiError& e) {
      send(error_body(e));
      sink.done();
      st.ticket.leave();
      return true;
    };

    if (chat) send(chat_chunk_json(h, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr, g.include_usage));
    Outcome out;
    try {
      out = run(st.job, [&](Piece& p) { return send_piece(p, nullptr) && !gone(); }, gone);
    } catch (const std::exception& e) {
      session.reset();
      count(&Counters::failed);
      std::fprintf(stderr, "sluice serve: streaming %s: %s\n", h.id.c_str(), e.what());
      return end_with_error(ApiError{500, std::string("Generation failed: ") + e.what(), "server_error", "", ""});
    }
    record(out, t0);
    st.ticket.leave();  // the model is free; what is left is writing
    if (out.gen.finish == Finish::cancelled) {
      if (cancel && ok) return end_with_error(shutting_down());
      return false;  // the client left: drop the connection
    }
    const std::string finish = out.finish_reason();
    if (out.last.has_text() || !out.last.logprobs.empty()) send_piece(out.last, nullptr);
    if (chat && !out.tool_calls.empty()) {
      json calls = json::array();
      for (size_t i = 0; i < out.tool_calls.size(); i++) {
        json c = out.tool_calls[i];
        c["index"] = i;
        calls.push_back(c);
      }
      send(chat_chunk_json(h, {{"tool_calls", calls}}, nullptr, nullptr, g.include_usage));
    }
    if (chat)
      send(chat_chunk_json(h, json::object(), nullptr, finish, g.include_usage));
    else
      send(completion_chunk_json(h, "", nullptr, finish, g.include_usage));
    if (g.include_usage) send(usage_chunk_json(h, g.endpoint, usage_of(out)));
    static const char done[] = "data: [DONE]\n\n";
    ok = ok && sink.write(done, sizeof done - 1);
    if (ok) sink.done();
    return ok;
  }

  json stats() const {
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
};

Server::Server(Model& model, const text::Tokenizer& tok, ServerOptions opt)
    : impl_(std::make_unique<Impl>(model, tok, std::move(opt))) {
  if (impl_->opt.queue < 0) fail("serve", "--queue must be >= 0");
  if (impl_->opt.max_tokens < 1) fail("serve", "--max-tokens must be >= 1");
}

Server::~Server() = default;

void Server::bind() {
  Impl& s = *impl_;
  const std::string where = s.opt.host + ":" + std::to_string(s.opt.port);
  if (s.opt.port == 0)
    s.bound_port = s.http.bind_to_any_port(s.opt.host);
  else
    s.bound_port = s.http.bind_to_port(s.opt.host, s.opt.port) ? s.opt.port : -1;
  if (s.bound_port <= 0) fail(where, "cannot listen (address in use, or not an address of this machine?)");
}

int Server::port() const { return impl_->bound_port; }
const std::string& Server::model_id() const { return impl_->opt.model_id; }

void Server::serve() {
  if (impl_->bound_port <= 0) fail("serve", "bind() first");
  bool ok = impl_->http.listen_after_bind();
  if (!ok && !impl_->stopping) fail(impl_->opt.host + ":" + std::to_string(impl_->bound_port), "listening failed");
}

void Server::stop() {
  impl_->stopping = true;
  impl_->sched.close();
  impl_->http.stop();
}

void Server::cancel_running() { impl_->cancel = true; }
bool Server::running_generation() const { return impl_->generating.load(); }
nlohmann::json Server::stats() const { return impl_->stats(); }

}  // namespace sluice::serve
