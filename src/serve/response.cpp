// serve/response.cpp — the JSON of replies (serve/response.h).
#include "serve/response.h"

namespace sluice::serve {

json usage_json(const Usage& u, Endpoint e) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  if (e == Endpoint::chat) j["completion_tokens_details"] = {{"reasoning_tokens", u.reasoning_tokens}};
  return j;
}

const char* finish_reason_name(Finish f) { return f == Finish::length ? "length" : "stop"; }

namespace {

json bytes_json(const std::string& b) {
  json a = json::array();
  for (unsigned char c : b) a.push_back(int(c));
  return a;
}

}  // namespace

json chat_logprobs_json(const std::vector<TokenInfo>& toks) {
  json content = json::array();
  for (const TokenInfo& t : toks) {
    json top = json::array();
    for (auto& [b, lp] : t.top) top.push_back({{"token", b}, {"logprob", lp}, {"bytes", bytes_json(b)}});
    content.push_back({{"token", t.bytes}, {"logprob", t.logprob}, {"bytes", bytes_json(t.bytes)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<TokenInfo>& toks, size_t text_offset0) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t at = text_offset0;
  for (const TokenInfo& t : toks) {
    tokens.push_back(t.bytes);
    lps.push_back(t.logprob);
    json top = json::object();
    for (auto& [b, lp] : t.top) top[b] = lp;
    tops.push_back(top);
    offsets.push_back(at);
    at += t.bytes.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

namespace {

json header_fields(const ReplyHeader& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model},
          {"system_fingerprint", h.fingerprint}};
}

void add_token_ids(json& choice, const ReplyBody& b) {
  if (b.token_ids) choice["token_ids"] = *b.token_ids;
  if (b.prompt_ids) choice["prompt_token_ids"] = *b.prompt_ids;
}

}  // namespace

json chat_completion_json(const ReplyHeader& h, const ReplyBody& b) {
  json msg = {{"role", "assistant"}, {"content", b.content}, {"refusal", nullptr}};
  if (b.has_reasoning) msg["reasoning_content"] = b.reasoning;
  if (b.tool_calls.is_array() && !b.tool_calls.empty()) {
    msg["tool_calls"] = b.tool_calls;
    if (b.content.empty()) msg["content"] = nullptr;
  }
  json choice = {{"index", 0}, {"message", msg}, {"logprobs", b.logprobs}, {"finish_reason", b.finish_reason}};
  add_token_ids(choice, b);
  json j = header_fields(h, "chat.completion");
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(b.usage, Endpoint::chat);
  return j;
}

json text_completion_json(const ReplyHeader& h, const ReplyBody& b) {
  json choice = {{"text", b.content}, {"index", 0}, {"logprobs", b.logprobs}, {"finish_reason", b.finish_reason}};
  add_token_ids(choice, b);
  json j = header_fields(h, "text_completion");
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(b.usage, Endpoint::completions);
  return j;
}

json chat_chunk_json(const ReplyHeader& h, const json& delta, const json& logprobs, const json& finish_reason,
                     bool include_usage) {
  json j = header_fields(h, "chat.completion.chunk");
  j["choices"] = json::array({{{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish_reason}}});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json completion_chunk_json(const ReplyHeader& h, const std::string& text, const json& logprobs,
                           const json& finish_reason, bool include_usage) {
  json j = header_fields(h, "text_completion");
  j["choices"] = json::array({{{"text", text}, {"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_reason}}});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json usage_chunk_json(const ReplyHeader& h, Endpoint e, const Usage& u) {
  json j = header_fields(h, e == Endpoint::chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(u, e);
  return j;
}

json progress_chunk_json(const ReplyHeader& h, Endpoint e, size_t processed, size_t total, bool include_usage) {
  json j = header_fields(h, e == Endpoint::chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["prompt_progress"] = {{"processed", processed}, {"total", total}};
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json responses_object(const ReplyHeader& h, const std::string& status, const json& output, const json& usage) {
  return {{"id", h.id},
          {"object", "response"},
          {"created_at", h.created},
          {"status", status},
          {"model", h.model},
          {"output", output},
          {"usage", usage},
          {"error", nullptr},
          {"incomplete_details", nullptr},
          {"instructions", nullptr},
          {"metadata", json::object()},
          {"parallel_tool_calls", true},
          {"tool_choice", "auto"},
          {"tools", json::array()},
          {"text", {{"format", {{"type", "text"}}}}}};
}

json responses_message(const std::string& id, const std::string& text, bool done) {
  json content = json::array();
  if (done) content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}});
  return {{"type", "message"},
          {"id", id},
          {"status", done ? "completed" : "in_progress"},
          {"role", "assistant"},
          {"content", content}};
}

json responses_json(const ReplyHeader& h, const ReplyBody& b, const std::string& message_id) {
  const Usage& u = b.usage;
  json usage = {{"input_tokens", u.prompt_tokens},
                {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                {"output_tokens", u.completion_tokens},
                {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
                {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  const bool complete = b.finish_reason != "length";
  json j = responses_object(h, complete ? "completed" : "incomplete",
                            json::array({responses_message(message_id, b.content, true)}), usage);
  if (!complete) j["incomplete_details"] = {{"reason", "max_output_tokens"}};
  return j;
}

}  // namespace sluice::serve
