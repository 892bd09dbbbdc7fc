// serve/request.h — checking OpenAI requests: JSON in, a GenerationRequest or an ApiError out.
// Pure functions (no server, no I/O), so a fuzz target can drive them directly.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/generate.h"
#include "serve/api.h"

namespace sluice::serve {

// What the server allows, for checking requests.
struct Limits {
  std::string model_id;         // the one served model; requests must name it
  int max_tokens = 4096;        // per request; larger requests are refused
  int vocab_size = 0;           // token-id prompts must be below it
  int64_t context_length = 0;   // prompt + completion must fit
  // Lenient: sampling fields other servers (vLLM, llama.cpp) take and sluice does
  // not implement (min_p, repetition_penalty, chat_template_kwargs, ...) are
  // ignored and listed in GenerationRequest::ignored, and reasoning_effort
  // "minimal" means "low". Strict: both are refused (400), like OpenAI does.
  bool lenient = false;
};

// Bounds on request fields (the body size and the prompt-token cap bound the rest).
constexpr size_t kMaxToolNameLength = 64;  // OpenAI's rule: [a-zA-Z0-9_-]{1,64}
constexpr size_t kMaxTools = 128;
constexpr size_t kMaxStopLength = 1024;

enum class Endpoint { chat, completions };
enum class Api { chat_completions, completions, responses };  // the route a request came in on

// A checked request, with every default filled in.
struct GenerationRequest {
  Endpoint endpoint = Endpoint::chat;  // how the prompt is made (responses: chat)
  Api api = Api::chat_completions;     // the shape of the reply
  std::string model;
  std::vector<std::string> ignored;    // lenient mode: fields ignored (for the log)

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
  // Extension (stream_options.include_progress): `event: prompt_progress` SSE events
  // with {processed, total} prompt tokens after each prefill chunk (OpenAI clients ignore them).
  bool include_progress = false;
  bool return_token_ids = false;  // extension (vLLM's name): ids of prompt and completion in the reply
  bool ignore_eos = false;        // extension (vLLM's name): do not stop on the end-of-message ids
};

// Refuses (ApiError 400) JSON text nested deeper than max_depth, before it is
// parsed: nested structures are walked recursively further on.
void check_json_depth(std::string_view text, int max_depth);

// Throw ApiError on anything they cannot honour. The seed is left at 0 when not given.
GenerationRequest parse_chat_request(const json& body, const Limits& lim);
GenerationRequest parse_completion_request(const json& body, const Limits& lim);
// The Responses API, minimal: `input` (a string, or messages with text parts),
// `instructions`, sampling, `max_output_tokens`, `reasoning.effort`, `stream`.
// Becomes a chat request with api = Api::responses.
GenerationRequest parse_responses_request(const json& body, const Limits& lim);

}  // namespace sluice::serve
