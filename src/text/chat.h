// text/chat.h — Kimi K3's XTML chat markup (spec §6.3), stop ids, and reply splitting.
//
// render_chat() turns OpenAI-style messages into prompt ids. It follows the
// official encoder's segment rule: every special marker, tag name, ` key`, `="`,
// attribute value, `"` and content string is its own segment and is
// BPE-encoded on its own, so token boundaries fall at segment boundaries; only
// the renderer's own markers become special ids (message text never does).
//
// Messages (nlohmann::json array of objects):
//   {"role":"system"|"user", "content": str | [{"type":"text","text":...}] | null, "name"?}
//   {"role":"system", "tools":[...]}            -> lazily added tools ("New Tools Available")
//   {"role":"assistant", "content", "reasoning_content"?, "tool_calls"?:
//       [{"id", "type":"function", "function":{"name", "arguments": json-string | object}}]}
//   {"role":"tool", "tool_call_id"?, "content", "name"?|"tool"?}
//   "developer" is treated as "system". Image parts are rejected (text path only).
// Tool results that follow an assistant turn are reordered to its tool_calls order
// when every tool_call_id resolves; their index counts 1, 2, ... per assistant turn.
//
// Generated replies: after the prompt the model writes reasoning, then
// `<|close|>think<|sep|><|open|>response<|sep|>`, the answer, optionally a tools
// block, `<|close|>message<|sep|>` and `<|end_of_msg|>` (the stop id).
// ReplyStream/split_reasoning split decoded text (specials shown) on those markers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace sluice::text {

struct ChatOptions {
  nlohmann::json tools = nullptr;  // OpenAI tools list; null or [] for none
  bool thinking = true;            // open <think> in the prompt (else <response>)
  // low | medium | high | max; "" sends no thinking-effort message. Ignored
  // when thinking is off.
  std::string reasoning_effort = "max";
  nlohmann::json tool_choice = nullptr;      // "required" / "none" add a control message
  nlohmann::json response_format = nullptr;  // {"type":"json_object"} or {"type":"json_schema",...}
  bool add_generation_prompt = true;
};

struct ChatSegment {
  std::string text;
  bool special = false;  // text is the spelling of one special token
};

// The rendered prompt as segments (throws sluice::Error on malformed messages).
std::vector<ChatSegment> chat_segments(const nlohmann::json& messages, const ChatOptions& opt = {});
// The segments concatenated (for logs and tests; tokenizing this string whole can
// differ from render_chat).
std::string render_chat_text(const nlohmann::json& messages, const ChatOptions& opt = {});
// Prompt ids, tokenized segment by segment. No [BOS] is added.
// Tokenizing stops once more than max_tokens ids are made (the prompt is then
// longer than that, and its ids past the cut are not all there).
std::vector<int> render_chat(const Tokenizer& tok, const nlohmann::json& messages,
                             const ChatOptions& opt = {}, size_t max_tokens = SIZE_MAX);

// Ids that end a reply: <|end_of_msg|> (end of turn), then [EOS] if the vocabulary
// has it. Looked up by spelling; throws if <|end_of_msg|> is missing.
std::vector<int> chat_stop_ids(const Tokenizer& tok);

// A generated reply split into its channels.
struct ReplyParts {
  std::string reasoning;                             // the think channel
  std::string content;                               // the response channel
  nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI-style, from the tools block
  std::string tail;  // markup after the response (tools block, closing tags), raw
  bool reasoning_done = false;  // the think channel was closed
};

// Incremental splitter for streaming: feed decoded text (specials shown) as it
// arrives; each call returns what became certain. Text that might be the start
// of a marker is held until it is not.
struct ReplyStream {
  struct Delta {
    std::string reasoning, content;
  };
  // thinking: the prompt ended with <think> (true) or <response> (false).
  explicit ReplyStream(bool thinking = true);
  Delta push(std::string_view text);
  Delta finish();  // end of generation: releases held text, parses the tools block
  const ReplyParts& parts() const { return parts_; }

 private:
  enum class Phase { reasoning, response_open, content, tail };
  Delta advance(bool final);
  std::string buf_;  // text not yet assigned to a channel
  Phase phase_;
  ReplyParts parts_;
};

// Whole-reply convenience over ReplyStream: split on the think/response marker,
// strip the trailing close markers, parse tool calls. Without the marker (still
// thinking, or cut short) everything is reasoning when thinking is on.
ReplyParts split_reasoning(std::string_view reply, bool thinking = true);

// Parses a tools block (`<|open|>tools<|sep|>...`) into OpenAI tool_calls:
// [{"id":"call_<index>","type":"function","function":{"name","arguments":json-string}}].
nlohmann::json parse_tool_calls(std::string_view xtml);

// Python's json.dumps(v, ensure_ascii=False) with its default separators (", ", ": ")
// or compact ones (",", ":"); objects in the json's own key order.
std::string python_json(const nlohmann::json& v, bool compact);
std::string python_json(const nlohmann::ordered_json& v, bool compact);

}  // namespace sluice::text
