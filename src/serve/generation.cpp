// serve/generation.cpp — one generation request, from its body to its reply (serve/server_impl.h).
#include "base/error.h"
#include "serve/server_impl.h"
#include "serve/socket.h"
#include "text/chat.h"

namespace sluice::serve {

// Checks, tokenizes and names a request; throws ApiError.
Job Server::Impl::prepare(const httplib::Request& req, Endpoint ep) {
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
Ticket Server::Impl::admit() {
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

// Runs one generation with the model (the caller holds the front ticket).
// emit() gets each piece of text as it becomes final; it returns false when
// the client is gone, and so does gone(). Throws what the engine throws.
Outcome Server::Impl::run(Job& job, const std::function<bool(Piece&)>& emit, const std::function<bool()>& gone) {
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

void Server::Impl::handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
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
void Server::Impl::complete(httplib::Response& res, Job& job, int fd) {
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

// Streaming: headers now, then the generation writes SSE chunks as it goes.
void Server::Impl::stream(httplib::Response& res, Job job, Ticket ticket, int fd) {
  auto st = std::make_shared<StreamJob>(StreamJob{std::move(job), std::move(ticket), fd});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st](size_t, httplib::DataSink& sink) { return stream_body(*st, sink); },
      [st](bool) { st->ticket.leave(); });
}

bool Server::Impl::stream_body(StreamJob& st, httplib::DataSink& sink) {
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

}  // namespace sluice::serve
