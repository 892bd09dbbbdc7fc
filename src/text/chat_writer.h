// text/chat_writer.h — the renderer's segment writer: XTML tags and message
// bodies as ChatSegments (the segment rule is in chat.h). Internal to text/.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/chat.h"
#include "text/python_text.h"
#include "text/xtml.h"

namespace sluice::text {

struct Writer {
  std::vector<ChatSegment> segs;

  void special(std::string_view s) { segs.push_back({std::string(s), true}); }
  void text(std::string s) {
    if (!s.empty()) segs.push_back({std::move(s), false});
  }
  void open(std::string_view tag, const std::vector<std::pair<std::string, std::string>>& attrs = {}) {
    special(kOpen);
    text(std::string(tag));
    for (auto& [key, value] : attrs) {
      text(" " + key);
      text("=\"");
      std::string esc;
      for (char c : value) {
        if (c == '&')
          esc += "&amp;";
        else if (c == '"')
          esc += "&quot;";
        else
          esc += c;
      }
      text(std::move(esc));
      text("\"");
    }
    special(kSep);
  }
  void close(std::string_view tag) {
    special(kClose);
    text(std::string(tag));
    special(kSep);
  }
  void internal(const std::string& type, std::string_view body) {
    open("message", {{"role", "system"}, {"type", type}});
    text(python_strip(body));
    close("message");
    special(kEndOfMsg);
  }
};

// "chat: messages[i]", the prefix of errors about message i.
std::string where_msg(size_t i);
// A message's content (string, text parts or null) as text segments.
void content_segments(Writer& w, const nlohmann::json* content, const std::string& where);
// Tools serialized as the template does (compact, keys sorted).
std::string tools_json(const nlohmann::json& tools);
// The tool-declare system message (lazily_added: the "New Tools Available" form).
void tool_declare(Writer& w, const nlohmann::json& tools, bool lazily_added);
// The function object of a tool call ({"function": {...}} or the call itself).
const nlohmann::json* call_function(const nlohmann::json& call);
// An assistant message's think/response channels and tools block.
void assistant_segments(Writer& w, const nlohmann::json& m, bool thinking, const std::string& where);
// The message's role ("developer" read as "system"); throws on anything else.
std::string role_of(const nlohmann::json& m, size_t i);
// Reorders each run of tool results to the order of the preceding assistant's
// tool_calls when every result's tool_call_id resolves, and names each result
// after its call. Returns the messages in rendering order.
std::vector<nlohmann::json> normalize_tool_results(const nlohmann::json& messages);

}  // namespace sluice::text
