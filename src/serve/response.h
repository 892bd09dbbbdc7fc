// serve/response.h — the JSON of replies: whole completions, streamed chunks, usage, logprobs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "serve/request.h"

namespace sluice::serve {

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
// stream_options.include_progress: {"choices": [], "prompt_progress": {processed, total}},
// shaped like the usage chunk so that SDK loops over `choices[0]?.delta` pass over it.
json progress_chunk_json(const ReplyHeader& h, Endpoint e, size_t processed, size_t total, bool include_usage);

// The Responses API (minimal): a response object with one message item of output_text.
// status: in_progress | completed | incomplete (finish_reason "length").
json responses_object(const ReplyHeader& h, const std::string& status, const json& output, const json& usage);
json responses_message(const std::string& id, const std::string& text, bool done);
json responses_json(const ReplyHeader& h, const ReplyBody& b, const std::string& message_id);

}  // namespace sluice::serve
