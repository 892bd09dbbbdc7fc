// serve/server.h — the OpenAI-compatible HTTP server.
//
// Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions,
// POST /v1/completions, GET /health (status and counters, no key needed).
// Generation requests are checked (serve/api.h), tokenized, then take their
// turn on the one model (serve/scheduler.h): a full line is answered 429 with
// Retry-After. Replies are one JSON object, or SSE chunks ending in
// `data: [DONE]` when `stream` is set. A client that disconnects, while waiting
// or while its reply is generated, is noticed before the next decode step and
// its generation is cancelled.
//
// The server keeps the last states of the one Session it drives in a
// PrefixCache: a request whose prompt extends a saved state (a chat's next turn)
// only prefills the new tokens; usage.prompt_tokens_details.cached_tokens and
// /health report how many tokens were reused.
//
// Shutdown: stop() stops accepting, answers waiting requests 503 and lets the
// running generation finish; cancel_running() cancels it (its reply is 503, or
// an error event when streaming). serve() returns when every connection is done.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/drafter.h"
#include "k3/model.h"
#include "text/tokenizer.h"

namespace sluice::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;         // 0: any free port (see Server::port())
  std::string api_key;     // empty: no key needed
  int queue = 4;           // requests that may wait behind the running one
  int max_tokens = 4096;   // completion tokens per request: the cap and the chat default
  size_t max_request_bytes = 8u << 20;
  std::string model_id;    // the name clients must send; empty: the model directory's name
  uint64_t state_cache_bytes = 2ull << 30;  // prefix states kept for reuse
  DraftOptions draft;      // speculative drafts (engine/drafter.h); max_tokens 0: off
};

class Server {
 public:
  // The server drives `model` alone while it runs (one generation at a time).
  Server(Model& model, const text::Tokenizer& tok, ServerOptions opt);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port; throws sluice::Error naming the address if it cannot.
  void bind();
  int port() const;
  const std::string& model_id() const;
  // Accepts and answers until stop(); returns when every connection is done.
  void serve();
  // Thread-safe (not async-signal-safe: call it from a thread that waits for signals).
  void stop();
  void cancel_running();
  bool running_generation() const;

  nlohmann::json stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::serve
