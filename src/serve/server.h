// serve/server.h — the OpenAI-compatible HTTP server.
//
// Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions,
// POST /v1/completions, POST /v1/responses (minimal: text in, text out),
// GET /metrics (Prometheus text), GET /health (no key needed).
// Before any work for a request the server checks, in order: the Host header
// (DNS rebinding, serve/guard.h), the API key (every route but /health), the
// body's media type (application/json), and then reads the body decoded
// (chunked, gzip) up to --max-request-bytes.
// Generation requests are checked (serve/request.h), tokenized, then take their
// turn (serve/scheduler.h): up to --parallel N generate together, decoded by one
// thread in shared passes (engine/batch.h); --queue more wait; a full line is
// answered 429 with Retry-After. Replies are one JSON object, or SSE events when `stream` is set
// (with `: ping` comments while the prompt is prefilled or a step is slow). A
// client that disconnects, while waiting or while its reply is generated, is
// noticed between prefill chunks and decode steps and its generation is cancelled.
//
// The server keeps the last states of its N sessions in a PrefixCache: a
// request whose prompt extends a saved state (a chat's next turn) only
// prefills the new tokens.
//
// Every request ends in one log line on stderr (serve/request_log.h).
//
// Loading: a Server made without a model listens at once; /health answers 503
// {"status":"loading"} and generation routes 503 until attach() gives it the model.
//
// Shutdown: stop() stops accepting, answers waiting requests 503 and lets the
// running generation finish; cancel_running() cancels it (its reply is 503, or
// an error event when streaming). serve() returns when every connection is done.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/drafter.h"
#include "model/model.h"
#include "text/chat_defaults.h"
#include "text/tokenizer.h"

namespace sluice::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;         // 0: any free port (see Server::port())
  std::string api_key;     // empty: no key needed
  int parallel = 1;        // sequences decoded together (one pass per step; serve/decoder.cpp)
  int queue = 4;           // requests that may wait behind the running ones
  int max_tokens = 4096;   // completion tokens per request: the cap, and the chat default unless `defaults` has one
  // The model's generation_config.json (text::chat_defaults): sampling, reasoning
  // effort and the chat length of a request that does not give its own.
  text::ChatDefaults defaults;
  int max_prompt_tokens = 32768;  // prompt tokens per request (far below K3's context: prefill is slow)
  size_t max_request_bytes = 8u << 20;  // the decoded body
  // The context a request may fill, prompt and completion together (-c/--ctx-size,
  // what the memory plan reserved state for); longer requests get 400
  // context_length_exceeded, and /v1/models says it. 0: the model's own.
  int64_t context_length = 0;
  // Bytes set aside for handling request bodies (serve/request_memory.h): a body is
  // charged before it is read; beyond, 503 with Retry-After (or 413 when it could never fit).
  uint64_t request_memory = 256ull << 20;
  std::string model_id;    // the name clients must send; empty: the model directory's name
  std::string device = "cpu";  // /health's "device": where the arithmetic runs (cpu or cuda)
  std::string device_detail;   // /health's "device_detail" (kernels/device.h's describe_backend)
  uint64_t state_cache_bytes = 2ull << 30;  // prefix states kept for reuse
  // Prefix states the memory plan reserved room for besides the `parallel` live
  // ones (ModelOptions::saved_states = saved_states + parallel - 1): when > 0,
  // the prefix cache holds at most that share of the plan's state reserve, so
  // it stays inside --ram-budget. 0: state_cache_bytes alone.
  int saved_states = 0;
  bool lenient = true;     // ignore known vendor fields (serve/request.h)
  bool log_json = false;   // request log lines as JSON
  std::vector<std::string> allowed_hosts;  // Host names accepted besides IPs, localhost, --host ("*": any)
  double header_timeout = 10;  // seconds a connection may take to send a request's headers
  int max_connections = 256;   // connections served at once (each holds a thread)
  double ping_seconds = 10;    // SSE: a `: ping` comment when nothing was sent for this long
  int prefill_chunk_tokens = 256;  // cancellation and pings are checked between chunks
  // A non-streaming request whose client left keeps running this long for an identical
  // retry to take it over: the openai clients retry 0.5 to 8 s after a timeout.
  double retry_grace = 30;
  int test_chunk_delay_ms = 0;  // test hook: sleep after each prefill chunk (a slow model)
  DraftOptions draft;      // speculative drafts (engine/drafter.h); max_tokens 0: off
};

// The server's version string (SLUICE_VERSION when the build defines it).
const char* server_version();

class Server {
 public:
  // Loading: listens (after bind/serve) before the model is there; attach() makes it ready.
  explicit Server(ServerOptions opt);
  // Ready at once. The server drives `model` alone while it runs (one generation at a time).
  Server(Model& model, const text::Tokenizer& tok, ServerOptions opt);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // What /health reports while loading.
  void set_loading(const std::string& phase);
  void attach(Model& model, const text::Tokenizer& tok);

  // Binds host:port exclusively (no SO_REUSEPORT); throws sluice::Error naming the address if it cannot.
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
