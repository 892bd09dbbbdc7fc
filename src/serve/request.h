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

}  // namespace sluice::serve
