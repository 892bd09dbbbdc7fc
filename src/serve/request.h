// serve/request.h — checking OpenAI requests: JSON in, a GenerationRequest or an ApiError out.
// Pure functions (no server, no I/O), so a fuzz target can drive them directly.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/generate.h"
#include "serve/api.h"
#include "text/chat_defaults.h"

namespace sluice::serve {

// What the server allows, for checking requests.
struct Limits {
  std::string model_id;         // the one served model; requests must name it
  int max_tokens = 4096;        // per request; larger requests are refused
  int vocab_size = 0;           // token-id prompts must be below it
  int64_t context_length = 0;   // prompt + completion must fit
  // Lenient: sampling fields other servers (vLLM, llama.cpp) take and sluice does
  // not implement (min_p, repetition_penalty, ...) are ignored and listed in
  // GenerationRequest::ignored, reasoning_effort "minimal" means "low", and a
  // request without `model` asks for the served one. Strict: all three are
  // refused (400), like OpenAI does.
  bool lenient = false;
  // The model's defaults (generation_config.json): a request's temperature,
  // top_p, reasoning effort and chat length when it gives none.
  text::ChatDefaults defaults;
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

  // Chat rendering. Thinking is turned off by reasoning_effort "none" (or
  // reasoning.effort), chat_template_kwargs {thinking|enable_thinking: false}
  // (vLLM, SGLang), enable_thinking: false, or thinking {type: "disabled"}
  // (Moonshot's API); the same switches set to true turn it on.
  bool thinking = true;
  std::string reasoning_effort = "max";  // low | high | max (medium is taken as high: text::thinking_effort)
  json tools = nullptr, tool_choice = nullptr, response_format = nullptr;

  int max_tokens = 0;  // 0: not given (the server picks its default)
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
  bool stream = false;
  bool include_usage = false;
  // Extension (stream_options.include_progress): after each prefill chunk, a chunk
  // with `choices: []` and prompt_progress {processed, total} prompt tokens (the
  // shape of OpenAI's usage chunk, which clients' `choices[0]?.delta` loops pass over).
  bool include_progress = false;
  bool return_token_ids = false;  // extension (vLLM's name): ids of prompt and completion in the reply
  bool ignore_eos = false;        // extension (vLLM's name): do not stop on the end-of-message ids
};

// Refuses (ApiError 400) JSON text nested deeper than max_depth, before it is
// parsed: nested structures are walked recursively further on.
void check_json_depth(std::string_view text, int max_depth);

// Throw ApiError on anything they cannot honour. The seed is left at 0 when not given;
// what the request leaves out comes from lim.defaults.
GenerationRequest parse_chat_request(const json& body, const Limits& lim);
GenerationRequest parse_completion_request(const json& body, const Limits& lim);
// The Responses API, minimal: `input` (a string, or messages with text parts),
// `instructions`, sampling, `max_output_tokens`, `reasoning.effort`, `stream`.
// Becomes a chat request with api = Api::responses.
GenerationRequest parse_responses_request(const json& body, const Limits& lim);

}  // namespace sluice::serve
