// serve/api.h — the OpenAI wire format: checking requests, shaping replies and errors.
//
// serve/ is sluice's OpenAI-compatible HTTP server:
//   api.h        request parsing/validation and the JSON of replies (no I/O)
//   scheduler.h  one generation at a time, a bounded FIFO line, 429 beyond it
//   socket.h     is the client still there? (cancelling abandoned generations)
//   server.h     the HTTP routes (cpp-httplib), SSE streaming, shutdown
//
// Parsing is strict, like OpenAI's own API: a field sluice does not know is
// refused ("Unrecognized request argument"), a known field it cannot honour
// (n > 1, penalties, images, audio, logit_bias, ...) is refused naming the
// field, and every refusal is an ApiError with the status and body OpenAI would
// send. Fields that change nothing about the output (user, metadata, ...) are
// accepted.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generate.h"

namespace sluice::serve {

using json = nlohmann::json;

// An error for the client: {"error":{"message","type","param","code"}} with `status`.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};
json error_body(const ApiError& e);
[[noreturn]] void refuse(const std::string& param, const std::string& message, const std::string& code = "invalid_value");

// What the server allows, for checking requests.
struct Limits {
  std::string model_id;         // the one served model; requests must name it
  int max_tokens = 4096;        // per request; larger requests are refused
  int vocab_size = 0;           // token-id prompts must be below it
  int64_t context_length = 0;   // prompt + completion must fit
};

enum class Endpoint { chat, completions };

// A checked request, with every default filled in.
struct GenerationRequest {
  Endpoint endpoint = Endpoint::chat;
  std::string model;

  json messages;                  // chat: the messages, checked (roles, text-only content)
  std::vector<int> prompt_ids;    // completions: a token-id prompt
  std::string prompt_text;        // completions: a text prompt
  bool prompt_is_text = false;

  // Chat rendering.
  bool thinking = true;                  // reasoning_effort "none" turns it off
  std::string reasoning_effort = "max";  // low | medium | high | max
  json tools = nullptr, tool_choice = nullptr, response_format = nullptr;

  int max_tokens = 0;  // 0: not given (the server picks its default)
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
  bool stream = false;
  bool include_usage = false;
  bool return_token_ids = false;  // extension (vLLM's name): ids of prompt and completion in the reply
  bool ignore_eos = false;        // extension (vLLM's name): do not stop on the end-of-message ids
};

// Refuses (ApiError 400) JSON text nested deeper than max_depth, before it is
// parsed: nested structures are walked recursively further on.
void check_json_depth(std::string_view text, int max_depth);

// Throw ApiError on anything they cannot honour. The seed is left at 0 when not given.
GenerationRequest parse_chat_request(const json& body, const Limits& lim);
GenerationRequest parse_completion_request(const json& body, const Limits& lim);

// The part of a reply that names it: id, created, model, system_fingerprint.
struct ReplyHeader {
  std::string id;  // chatcmpl-... or cmpl-...
  int64_t created = 0;
  std::string model;
  std::string fingerprint;
};

struct Usage {
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, reasoning_tokens = 0;
};
json usage_json(const Usage& u, Endpoint e);

const char* finish_reason_name(Finish f);  // stop | length (cancelled replies are never sent)

// One generated token as logprobs report it.
struct TokenInfo {
  std::string bytes;  // the token's raw bytes (maybe part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // (bytes, logprob), most probable first
};
// Chat: {"content":[{token, logprob, bytes, top_logprobs}], "refusal": null}.
json chat_logprobs_json(const std::vector<TokenInfo>& toks);
// Completions: {tokens, token_logprobs, top_logprobs, text_offset}; offsets count from text_offset0.
json completion_logprobs_json(const std::vector<TokenInfo>& toks, size_t text_offset0);

// A finished reply, for the non-streaming forms.
struct ReplyBody {
  std::string reasoning, content;
  bool has_reasoning = false;    // chat with thinking: reasoning_content is sent
  json tool_calls = nullptr;     // chat: an array when the model called tools
  json logprobs = nullptr;
  std::string finish_reason = "stop";
  Usage usage;
  const std::vector<int>* prompt_ids = nullptr;  // set for return_token_ids
  const std::vector<int>* token_ids = nullptr;
};
json chat_completion_json(const ReplyHeader& h, const ReplyBody& b);
json text_completion_json(const ReplyHeader& h, const ReplyBody& b);

// Streaming chunks; with include_usage every chunk carries "usage": null and a
// last chunk with no choices carries the usage, as OpenAI sends them.
json chat_chunk_json(const ReplyHeader& h, const json& delta, const json& logprobs, const json& finish_reason,
                     bool include_usage);
json completion_chunk_json(const ReplyHeader& h, const std::string& text, const json& logprobs,
                           const json& finish_reason, bool include_usage);
json usage_chunk_json(const ReplyHeader& h, Endpoint e, const Usage& u);

// json::dump that cannot throw: ill-formed UTF-8 becomes U+FFFD.
std::string dump(const json& j);

}  // namespace sluice::serve
