// text/chat.cpp — XTML rendering of a conversation (see chat.h). The Python-
// compatible spellings are in python_text.cpp, the per-message segments in
// chat_writer.cpp, reply splitting in reply_split.cpp, tool calls in tool_calls.cpp.
#include "text/chat.h"

#include "base/error.h"
#include "text/chat_writer.h"

namespace sluice::text {

using nlohmann::json;

std::vector<ChatSegment> chat_segments(const json& messages, const ChatOptions& opt) {
  if (!messages.is_array()) throw Error("chat: messages must be a JSON array");
  const std::string& effort = opt.reasoning_effort;
  if (!effort.empty() && effort != "low" && effort != "medium" && effort != "high" && effort != "max")
    throw Error("chat: reasoning effort must be low, medium, high or max (got \"" + effort + "\")");

  Writer w;
  if (truthy(opt.tools)) {
    if (!opt.tools.is_array()) throw Error("chat: tools must be an array");
    tool_declare(w, opt.tools, false);
  }
  if (opt.thinking && !effort.empty())
    w.internal("thinking-effort",
               "`thinking_effort` guides on how much to think in your thinking channel (not "
               "including the response channel), supported values include `low`, `medium`, "
               "`high`, and `max`.\nNow the system is invoked with `thinking_effort=" +
                   effort + "`.");

  std::vector<json> msgs = normalize_tool_results(messages);
  const json* last_calls = nullptr;  // tool_calls of the latest assistant message
  json last_calls_store;
  int tool_index = 0;
  for (size_t i = 0; i < msgs.size(); i++) {
    const json& m = msgs[i];
    std::string where = where_msg(i);
    std::string role = role_of(m, i);
    const json* name = member(m, "name");
    if (role == "system" && member(m, "tools") && truthy(m["tools"])) {
      if (!m["tools"].is_array()) fail(where, "tools must be an array");
      tool_declare(w, m["tools"], true);
    } else if (role == "system" || role == "user") {
      std::vector<std::pair<std::string, std::string>> attrs = {{"role", role}};
      if (name && truthy(*name)) attrs.push_back({"name", python_str(*name)});
      w.open("message", attrs);
      content_segments(w, member(m, "content"), where);
      w.close("message");
      w.special(kEndOfMsg);
    } else if (role == "assistant") {
      const json* calls = member(m, "tool_calls");
      last_calls_store = calls && calls->is_array() ? *calls : json();
      last_calls = last_calls_store.is_array() ? &last_calls_store : nullptr;
      tool_index = 0;
      std::vector<std::pair<std::string, std::string>> attrs = {{"role", "assistant"}};
      if (name && truthy(*name)) attrs.push_back({"name", python_str(*name)});
      w.open("message", attrs);
      assistant_segments(w, m, opt.thinking, where);
      w.close("message");
      w.special(kEndOfMsg);
    } else {  // tool
      tool_index++;
      const json* tool = m.contains("tool") ? member(m, "tool") : name;
      std::string tool_name;
      if (tool && tool->is_string()) {
        tool_name = tool->get<std::string>();
      } else if (last_calls && size_t(tool_index) <= last_calls->size()) {
        const json* fn = call_function((*last_calls)[tool_index - 1]);
        const json* n = fn ? member(*fn, "name") : nullptr;
        if (n && n->is_string()) tool_name = n->get<std::string>();
      }
      if (tool_name.empty() && !(tool && tool->is_string()))
        fail(where, "tool message needs a tool name: \"name\", \"tool\", or a matching assistant tool_call");
      w.open("message", {{"role", "tool"}, {"tool", tool_name}, {"index", std::to_string(tool_index)}});
      content_segments(w, member(m, "content"), where);
      w.close("message");
      w.special(kEndOfMsg);
    }
  }

  if (opt.tool_choice.is_string()) {
    if (opt.tool_choice == "required")
      w.internal("tool-choice",
                 "The system is invoked with `tool_choice=required`.\n"
                 "You MUST call tools in the next message.");
    else if (opt.tool_choice == "none")
      w.internal("tool-choice",
                 "The system is invoked with `tool_choice=none`.\n"
                 "You MUST NOT call any tools in the next message.");
  }

  const json& rf = opt.response_format;
  json rf_type = rf.is_object() ? rf.value("type", json()) : rf;
  const std::string kRaw =
      "Your response must be raw JSON data without markdown code blocks (```json) or any "
      "additional formatting.";
  if (rf_type == "json_object") {
    w.internal("response-format", "The system is invoked with `response_format=json_object`.\n" + kRaw);
  } else if (rf_type == "json_schema") {
    json schema;
    if (rf.is_object() && rf.contains("json_schema")) {
      const json& js = rf["json_schema"];
      if (js.is_object())
        schema = js.contains("schema") ? js["schema"] : js.contains("json_schema") ? js["json_schema"] : js;
      else
        schema = js;
    }
    w.internal("response-format", "The system is invoked with `response_format=json_schema`.\n" + kRaw +
                                      "\nThe JSON data must match the following schema:\n```json\n" +
                                      tools_json(schema) + "\n```");
  }

  if (opt.add_generation_prompt) {
    w.open("message", {{"role", "assistant"}});
    w.open(opt.thinking ? "think" : "response");
  }
  return std::move(w.segs);
}

std::string render_chat_text(const json& messages, const ChatOptions& opt) {
  std::string out;
  for (auto& s : chat_segments(messages, opt)) out += s.text;
  return out;
}

std::vector<int> render_chat(const Tokenizer& tok, const json& messages, const ChatOptions& opt,
                             size_t max_tokens) {
  std::vector<int> ids;
  for (auto& s : chat_segments(messages, opt)) {
    if (ids.size() > max_tokens) break;
    if (s.special)
      ids.push_back(tok.require_special(s.text));
    else
      tok.encode_into(s.text, /*allow_special=*/false, ids, max_tokens);
  }
  return ids;
}

std::vector<int> chat_stop_ids(const Tokenizer& tok) {
  std::vector<int> ids = {tok.require_special(kEndOfMsg)};
  if (int eos = tok.special_id("[EOS]"); eos >= 0) ids.push_back(eos);
  return ids;
}

}  // namespace sluice::text
