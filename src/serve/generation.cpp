// serve/generation.cpp — one generation request, from its body to its reply (serve/server_impl.h).
#include <thread>

#include "base/error.h"
#include "hub/sha256.h"
#include "serve/server_impl.h"
#include "serve/socket.h"
#include "text/chat.h"

namespace sluice::serve {

namespace {

const char* id_prefix(Api api) {
  switch (api) {
    case Api::completions: return "cmpl-";
    case Api::responses: return "resp_";
    default: return "chatcmpl-";
  }
}

ExpertStats minus(const ExpertStats& a, const ExpertStats& b) {
  ExpertStats d;
  d.fetched = a.fetched - b.fetched;
  d.bytes_read = a.bytes_read - b.bytes_read;
  d.cache_hits = a.cache_hits - b.cache_hits;
  d.bytes_hit = a.bytes_hit - b.bytes_hit;
  d.prefetched = a.prefetched - b.prefetched;
  d.prefetch_used = a.prefetch_used - b.prefetch_used;
  d.network_bytes = a.network_bytes - b.network_bytes;
  return d;
}

// A stable key for "the same request again": a digest of the route, the key it came
// with and the body (a body may be megabytes; the key lives as long as the generation).
std::string dedup_key(const httplib::Request& req, const std::string& body) {
  Hasher h;
  for (const std::string& part : {req.path, req.get_header_value("Authorization")}) {
    h.update(part.data(), part.size());
    h.update("\n", 1);
  }
  h.update(body.data(), body.size());
  return h.finish_hex();
}

// The body as JSON, holding at most max_values values (request_memory.h paid for
// that many); more is a 413 while parsing, before they are all made.
json parse_body(const std::string& text, uint64_t max_values) {
  uint64_t values = 0;
  json::parser_callback_t count = [&](int, json::parse_event_t ev, json&) {
    if (ev == json::parse_event_t::value || ev == json::parse_event_t::object_start ||
        ev == json::parse_event_t::array_start || ev == json::parse_event_t::key) {
      if (++values > max_values)
        throw ApiError{413,
                       "The request body holds more than " + std::to_string(max_values) +
                           " JSON values, more than this server handles for a body of its size.",
                       "invalid_request_error", "", "request_too_large"};
    }
    return true;
  };
  json body = json::parse(text, count, /*allow_exceptions=*/false);
  if (body.is_discarded())
    throw ApiError{400,
                   "We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
                   "your HTTP library correctly. The OpenAI API expects a JSON payload.)",
                   "invalid_request_error", "", "invalid_json"};
  return body;
}

// A stream's Server-Sent Events writer: once a write fails (the client left),
// nothing more is sent and ok stays false.
struct SseWriter {
  httplib::DataSink& sink;
  bool ok = true;
  int sequence = 0;  // the Responses API's sequence_number
  Clock::time_point last_write = Clock::now();

  bool write(const std::string& s) {
    ok = ok && sink.write(s.data(), s.size());
    last_write = Clock::now();
    return ok;
  }
  bool send(const json& j) { return write("data: " + dump(j) + "\n\n"); }
  bool send_event(const char* type, json j) {  // the Responses API's named events
    j["type"] = type;
    j["sequence_number"] = sequence++;
    return write(std::string("event: ") + type + "\ndata: " + dump(j) + "\n\n");
  }
};

// What a stream sends before its first token: the Responses API's opening
// events, or chat's assistant-role chunk (completions send nothing).
void send_stream_start(SseWriter& w, const ReplyHeader& h, const GenerationRequest& g, const std::string& msg_id) {
  if (g.api == Api::responses) {
    json obj = responses_object(h, "in_progress", json::array(), nullptr);
    w.send_event("response.created", {{"response", obj}});
    w.send_event("response.in_progress", {{"response", obj}});
    w.send_event("response.output_item.added", {{"output_index", 0}, {"item", responses_message(msg_id, "", false)}});
    w.send_event("response.content_part.added",
                 {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
  } else if (g.endpoint == Endpoint::chat) {
    w.send(chat_chunk_json(h, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr, g.include_usage));
  }
}

// The Responses API's closing events after the last token.
void send_responses_end(SseWriter& w, const ReplyHeader& h, const std::string& msg_id, const std::string& all_text,
                        const std::string& finish, const Usage& usage) {
  ReplyBody b;
  b.content = all_text;
  b.finish_reason = finish;
  b.usage = usage;
  json done = responses_json(h, b, msg_id);
  json item = done["output"][0];
  w.send_event("response.output_text.done",
               {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0}, {"text", all_text}});
  w.send_event("response.content_part.done",
               {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0}, {"part", item["content"][0]}});
  w.send_event("response.output_item.done", {{"output_index", 0}, {"item", item}});
  w.send_event(done["status"] == "completed" ? "response.completed" : "response.incomplete", {{"response", done}});
}

// Chat's and completions' closing chunks after the last token: the tool
// calls (chat), the finish reason, the usage when asked, then [DONE].
void send_chunks_end(SseWriter& w, const ReplyHeader& h, const GenerationRequest& g, const json& tool_calls,
                     const std::string& finish, const Usage& usage) {
  const bool chat = g.endpoint == Endpoint::chat;
  if (chat && !tool_calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < tool_calls.size(); i++) {
      json c = tool_calls[i];
      c["index"] = i;
      calls.push_back(c);
    }
    w.send(chat_chunk_json(h, {{"tool_calls", calls}}, nullptr, nullptr, g.include_usage));
  }
  if (chat)
    w.send(chat_chunk_json(h, json::object(), nullptr, finish, g.include_usage));
  else
    w.send(completion_chunk_json(h, "", nullptr, finish, g.include_usage));
  if (g.include_usage) w.send(usage_chunk_json(h, g.endpoint, usage));
  w.write("data: [DONE]\n\n");
}

}  // namespace

Job Server::Impl::prepare(const std::string& text, Api api) {
  check_json_depth(text, 64);
  const uint64_t cap = prompt_cap();
  Job job;
  {
    const json body = parse_body(text, json_value_limit(text.size(), cap));
    job.req = api == Api::chat_completions ? parse_chat_request(body, lim)
              : api == Api::responses      ? parse_responses_request(body, lim)
                                           : parse_completion_request(body, lim);
  }
  GenerationRequest& g = job.req;
  for (const std::string& f : g.ignored) request_context().log.warnings.push_back("ignored:" + f);
  const bool chat = g.endpoint == Endpoint::chat;
  // Tokenizing stops a token past the longest prompt that could be accepted: a huge
  // prompt is refused without its millions of tokens being made.
  bool cut = false;
  try {
    if (chat) {
      text::ChatOptions co;
      co.thinking = g.thinking;
      co.reasoning_effort = g.reasoning_effort;
      co.tools = g.tools;
      co.tool_choice = g.tool_choice;
      co.response_format = g.response_format;
      job.prompt = text::render_chat(*tok, g.messages, co, cap);
      cut = job.prompt.size() > cap;
    } else if (g.prompt_is_text) {
      // A raw interface: special-token spellings in the prompt are the tokens.
      cut = !tok->encode_into(g.prompt_text, /*allow_special=*/true, job.prompt, cap);
    } else {
      job.prompt = std::move(g.prompt_ids);
    }
    if (!g.ignore_eos) job.stop_ids = text::chat_stop_ids(*tok);
  } catch (const Error& e) {
    refuse(chat ? (api == Api::responses ? "input" : "messages") : "prompt", e.what());
  }
  // What made the prompt is not needed any more (a generation keeps its tokens only).
  g.messages = nullptr;
  std::string().swap(g.prompt_text);
  std::vector<int>().swap(g.prompt_ids);
  if (job.prompt.empty()) refuse("prompt", "The prompt is empty.");
  check_prompt_length(job, cut);
  if (!g.seed_given) g.sampling.seed = new_seed();
  job.head.id = new_id(id_prefix(api));
  job.head.created = unix_now();
  job.head.model = opt.model_id;
  job.head.fingerprint = fingerprint;
  return job;
}

void Server::Impl::check_prompt_length(Job& job, bool cut) const {
  GenerationRequest& g = job.req;
  const bool chat = g.endpoint == Endpoint::chat;
  const int64_t n = int64_t(job.prompt.size());
  // A cut prompt's length is known only to be past the cap.
  const std::string count = cut ? "more than " + std::to_string(prompt_cap()) : std::to_string(n);
  if (n > opt.max_prompt_tokens)
    throw ApiError{400,
                   "The prompt is " + count + " tokens; this server accepts at most " +
                       std::to_string(opt.max_prompt_tokens) + " (--max-prompt-tokens).",
                   "invalid_request_error", chat ? "messages" : "prompt", "prompt_too_long"};
  // Prompt and completion must fit the context (-c/--ctx-size: what the plan reserved
  // state for): a prompt that leaves no room for a token is refused, and the
  // completion, asked for or not, is cut to the room left (finish_reason "length").
  const int64_t room = lim.context_length - n;
  if (room >= 1) {
    // Not given: a chat reply gets the model's length (generation_config.json, within
    // --max-tokens), else --max-tokens; a completion gets 16 tokens, OpenAI's default.
    const int chat_default = lim.defaults.max_new_tokens > 0 ? std::min(lim.defaults.max_new_tokens, opt.max_tokens)
                                                              : opt.max_tokens;
    const int64_t want = g.max_tokens > 0 ? g.max_tokens : (chat ? chat_default : 16);
    g.max_tokens = int(std::min<int64_t>(want, room));
    return;
  }
  const std::string msg = "This model's maximum context length is " + std::to_string(lim.context_length) +
                          " tokens" + (opt.context_length > 0 ? " (as this server runs it: -c/--ctx-size)" : "") +
                          ". However, your prompt is " + count + " tokens, which leaves no room for a completion.";
  throw ApiError{400, msg + " Please reduce the length of the messages.", "invalid_request_error",
                 chat ? "messages" : "prompt", "context_length_exceeded"};
}

Ticket Server::Impl::admit() {
  if (stopping) throw shutting_down();
  std::optional<Ticket> t = sched.join();
  if (t) return std::move(*t);
  if (stopping) throw shutting_down();
  count(&Counters::rejected_busy);
  ApiError e{429,
             "The server is busy: " + std::to_string(opt.parallel) + " requests are generating (--parallel) and " +
                 std::to_string(opt.queue) +
                 " are waiting (--queue). Retry after the time in the Retry-After header.",
             "rate_limit_error", "", "server_busy"};
  throw e;
}

Outcome Server::Impl::run(Job& job, const std::function<bool(Piece&)>& emit, const std::function<bool()>& gone,
                          const std::function<void(size_t, size_t)>& tick) {
  const GenerationRequest& g = job.req;
  RequestLog& log = request_context().log;
  ReplyOptions ro;
  ro.chat = g.endpoint == Endpoint::chat;
  ro.thinking = g.thinking;
  ro.stop = g.stop;
  ro.logprobs = g.logprobs;
  ReplyBuilder reply(*tok, ro);
  Piece pending;
  Outcome out;

  // Everything below that the decode thread calls lives until generate_on_decoder() returns.
  auto r = std::make_shared<Running>();
  Running* rp = r.get();
  r->prompt = job.prompt;
  GenerateOptions& o = r->opt;
  o.max_new_tokens = g.max_tokens;
  o.sampling = g.sampling;
  o.stop_ids = job.stop_ids;
  o.logprobs = g.logprobs ? g.top_logprobs : -1;
  o.cancelled = [this, rp] { return cancel.load() || rp->gone.load(); };
  o.draft = opt.draft;
  o.draft_store = &drafts;
  o.prefill_chunk_tokens = opt.prefill_chunk_tokens;
  size_t prefilled = 0;
  o.prefill_progress = [this, rp, &prefilled](size_t done, size_t total) {
    if (done > prefilled) metrics.observe("sluice_rows_per_pass", double(done - prefilled));
    prefilled = done;
    if (done > 0 && opt.test_chunk_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(opt.test_chunk_delay_ms));
    std::lock_guard<std::mutex> lock(rp->mu);
    rp->progress_done = done;
    rp->progress_total = total;
    rp->progress_new = true;
    rp->cv.notify_all();
  };

  const auto t0 = request_context().t0;
  auto last_step = Clock::now();
  bool first = true;
  double ttft = -1;
  r->on_token = [&, rp](const TokenEvent& ev) {
    const auto now = Clock::now();
    if (first) {
      ttft = std::chrono::duration<double>(now - t0).count();
      metrics.observe("sluice_time_to_first_token_seconds", ttft);
      first = false;
    } else {
      metrics.observe("sluice_decode_step_seconds", std::chrono::duration<double>(now - last_step).count());
    }
    last_step = now;
    out.token_ids.push_back(ev.id);
    Verdict v = reply.push(ev, pending);
    if (pending.has_text()) {
      std::lock_guard<std::mutex> lock(rp->mu);
      rp->pieces.push_back(std::move(pending));
      pending = Piece{};
      rp->cv.notify_all();
    }
    if (rp->gone) return Verdict::cancel;
    return v;
  };
  generate_on_decoder(r, emit, gone, tick);
  if (ttft >= 0) log.ttft = ttft;
  if (r->error) std::rethrow_exception(r->error);
  out.gen = r->result;
  if (model->io().experts) out.experts = minus(r->experts_after, r->experts_before);
  if (out.gen.finish != Finish::cancelled) reply.finish(pending);
  out.tool_calls = reply.tool_calls();
  out.reasoning_tokens = reply.reasoning_tokens();
  out.stop_matched = reply.stop_matched();
  out.last = std::move(pending);

  log.prompt_tokens = out.gen.prompt_tokens;
  log.cached_tokens = out.gen.cached_tokens;
  log.completion_tokens = out.gen.generated_tokens;
  if (out.gen.decode_seconds > 0 && out.gen.generated_tokens > 1)
    log.tokens_per_second = double(out.gen.generated_tokens - 1) / out.gen.decode_seconds;
  if (model->io().experts) {
    log.bytes_read = int64_t(out.experts.bytes_read);
    if (out.experts.fetched) log.cache_hit_rate = double(out.experts.cache_hits) / double(out.experts.fetched);
  }
  if (out.gen.finish == Finish::cancelled) log.outcome = "cancelled";
  return out;
}

void Server::Impl::handle_generation(const httplib::Request& req, httplib::Response& res, std::string body,
                                     MemoryGrant grant, Api api) {
  count(&Counters::requests);
  RequestLog& log = request_context().log;
  try {
    std::string key = dedup_key(req, body);
    Job job = prepare(body, api);
    // The body, its JSON and its text are gone: what the generation keeps is its tokens.
    std::string().swap(body);
    grant.release();
    log.id = job.head.id;
    log.stream = job.req.stream;
    const int fd = find_connection_fd(req.local_addr, req.local_port, req.remote_addr, req.remote_port);

    // A retry of a running non-streaming request waits for that request's reply.
    std::shared_ptr<SharedReply> shared;
    if (!job.req.stream) {
      std::lock_guard<std::mutex> lock(mu);
      auto it = running.find(key);
      if (it != running.end()) {
        shared = it->second;
        std::lock_guard<std::mutex> l2(shared->mu);
        shared->waiters++;
      }
    }
    if (shared) {
      count(&Counters::deduplicated);
      log.outcome = "deduplicated";
      std::unique_lock<std::mutex> lock(shared->mu);
      while (!shared->cv.wait_for(lock, kWaitSlice, [&] { return shared->done; })) {
        if (peer_closed(fd)) {
          shared->waiters--;
          log.outcome = "cancelled";
          return;
        }
      }
      shared->waiters--;
      res.status = shared->status;
      res.set_content(shared->body, "application/json");
      return;
    }

    Ticket ticket = admit();
    if (job.req.stream)
      stream(res, std::move(job), std::move(ticket), fd);
    else
      complete(res, job, std::move(ticket), fd, key);
  } catch (const ApiError& e) {
    if (e.status == 429) res.set_header("Retry-After", std::to_string(retry_after_seconds()));
    if (e.status != 429) count(&Counters::refused);
    send_error(res, e);
  } catch (const std::exception& e) {
    count(&Counters::failed);
    log.outcome = "failed";
    log_message(req.method + " " + req.path + ": " + e.what(), opt.log_json);
    send_error(res, ApiError{500, std::string("Generation failed: ") + e.what(), "server_error", "", ""});
  }
}

void Server::Impl::complete(httplib::Response& res, Job& job, Ticket ticket, int fd, const std::string& key) {
  RequestLog& log = request_context().log;
  auto shared = std::make_shared<SharedReply>();
  {
    std::lock_guard<std::mutex> lock(mu);
    running[key] = shared;
  }
  // Retries waiting on this request get its reply (or its error), whatever happens.
  struct Publish {
    Impl& s;
    const std::string& key;
    std::shared_ptr<SharedReply> shared;
    httplib::Response& res;
    ~Publish() {
      {
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.running.find(key);
        if (it != s.running.end() && it->second == shared) s.running.erase(it);
      }
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->status = res.status > 0 ? res.status : 200;
      shared->body = res.body;
      if (res.body.empty()) {
        shared->status = 503;
        shared->body = dump(error_body(shutting_down()));
      }
      shared->done = true;
      shared->cv.notify_all();
    }
  } publish{*this, key, shared, res};

  // The client is gone once its connection closed and no retry of it is waiting
  // (a retry may come within --retry-grace seconds after the client left).
  Clock::time_point left{};
  auto gone = [&] {
    if (!peer_closed(fd)) return false;
    std::lock_guard<std::mutex> lock(shared->mu);
    if (shared->waiters > 0) return false;
    if (left == Clock::time_point{}) left = Clock::now();
    return seconds_since(left) >= opt.retry_grace;
  };
  auto gone_waiting = [&] { return peer_closed(fd) && [&] {
    std::lock_guard<std::mutex> lock(shared->mu);
    return shared->waiters == 0;
  }(); };

  const auto tq = Clock::now();
  while (!ticket.wait_turn(kWaitSlice)) {
    if (stopping) throw shutting_down();
    if (gone_waiting()) {
      count(&Counters::cancelled);
      log.outcome = "cancelled";
      return;  // nobody to answer
    }
  }
  if (stopping) throw shutting_down();
  log.queue_wait = seconds_since(tq);
  metrics.observe("sluice_queue_wait_seconds", log.queue_wait);

  const auto t0 = Clock::now();
  std::string reasoning, content;
  std::vector<TokenInfo> lps;
  auto take = [&](Piece& p) {
    reasoning += p.reasoning;
    content += p.content;
    for (auto& t : p.logprobs) lps.push_back(std::move(t));
  };
  Outcome out;
  out = run(job, [&](Piece& p) { take(p); return true; }, gone, [](size_t, size_t) {});
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
  json reply = job.req.api == Api::responses   ? responses_json(job.head, b, "msg_" + job.head.id.substr(5))
               : job.req.api == Api::completions ? text_completion_json(job.head, b)
                                                 : chat_completion_json(job.head, b);
  res.set_content(dump(reply), "application/json");
}

void Server::Impl::stream(httplib::Response& res, Job job, Ticket ticket, int fd) {
  auto st = std::make_shared<StreamJob>(StreamJob{std::move(job), std::move(ticket), fd});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: pass events on as they come
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st](size_t, httplib::DataSink& sink) { return stream_body(*st, sink); },
      [st](bool) { st->ticket.leave(); });
}

bool Server::Impl::stream_body(StreamJob& st, httplib::DataSink& sink) {
  RequestLog& log = request_context().log;
  const GenerationRequest& g = st.job.req;
  const ReplyHeader& h = st.job.head;
  const bool chat = g.endpoint == Endpoint::chat;
  const bool responses = g.api == Api::responses;
  const std::string msg_id = "msg_" + h.id.substr(std::min<size_t>(5, h.id.size()));
  SseWriter w{sink};
  const bool& ok = w.ok;
  size_t text_offset = 0;
  std::string all_text;
  auto send = [&](const json& j) { return w.send(j); };
  auto send_event = [&](const char* type, json j) { return w.send_event(type, std::move(j)); };
  // A comment line every ping_seconds of silence keeps clients and proxies from timing out
  // during a long prefill or a slow step; SSE clients ignore it.
  auto ping = [&] {
    if (ok && seconds_since(w.last_write) >= opt.ping_seconds) w.write(": ping\n\n");
  };
  auto send_piece = [&](Piece& p, const json& finish) {
    if (responses) {
      if (p.content.empty()) return ok;
      all_text += p.content;
      return send_event("response.output_text.delta",
                        {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0}, {"delta", p.content}});
    }
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
    log.error = e.code;
    if (responses)
      send_event("error", {{"code", e.code}, {"message", e.message}, {"param", nullptr}});
    else
      send(error_body(e));
    sink.done();
    st.ticket.leave();
    return true;
  };

  // The turn: headers are out already, so waiting is kept alive with pings too.
  const auto tq = Clock::now();
  while (!st.ticket.wait_turn(kWaitSlice)) {
    if (stopping) return end_with_error(shutting_down());
    if (gone()) {
      count(&Counters::cancelled);
      log.outcome = "cancelled";
      return false;
    }
    ping();
  }
  if (stopping) return end_with_error(shutting_down());
  log.queue_wait = seconds_since(tq);
  metrics.observe("sluice_queue_wait_seconds", log.queue_wait);

  const auto t0 = Clock::now();
  send_stream_start(w, h, g, msg_id);
  Outcome out;
  try {
    auto tick = [&](size_t done, size_t total) {
      if (g.include_progress && !responses && total > 0 && done > 0)
        send(progress_chunk_json(h, g.endpoint, done, total, g.include_usage));
      ping();
    };
    out = run(st.job, [&](Piece& p) { return send_piece(p, nullptr) && !gone(); }, gone, tick);
  } catch (const std::exception& e) {
    count(&Counters::failed);
    log.outcome = "failed";
    log_message("streaming " + h.id + ": " + e.what(), opt.log_json);
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
  if (responses)
    send_responses_end(w, h, msg_id, all_text, finish, usage_of(out));
  else
    send_chunks_end(w, h, g, out.tool_calls, finish, usage_of(out));
  if (ok) sink.done();
  return ok;
}

}  // namespace sluice::serve
