// text/chat_writer.cpp — the renderer's segment writer (see chat_writer.h).
#include "text/chat_writer.h"

#include <algorithm>

#include "base/error.h"

namespace sluice::text {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const char* xtml_type(const ordered_json& v) {
  switch (v.type()) {
    case ordered_json::value_t::boolean: return "boolean";
    case ordered_json::value_t::null: return "null";
    case ordered_json::value_t::number_integer:
    case ordered_json::value_t::number_unsigned:
    case ordered_json::value_t::number_float: return "number";
    case ordered_json::value_t::string: return "string";
    case ordered_json::value_t::object: return "object";
    default: return "array";
  }
}

}  // namespace

std::string where_msg(size_t i) { return "chat: messages[" + std::to_string(i) + "]"; }

void content_segments(Writer& w, const json* content, const std::string& where) {
  if (!content || content->is_null()) return;
  if (content->is_string()) {
    w.text(content->get<std::string>());
    return;
  }
  if (!content->is_array()) fail(where, "content must be a string, an array of parts or null");
  for (auto& part : *content) {
    if (!part.is_object()) fail(where, "content parts must be objects");
    const json* type = member(part, "type");
    if (type && type->is_string() && (*type == "image" || *type == "image_url"))
      fail(where, "image content is not supported by the text model");
    const json* t = member(part, "text");
    if (!t) fail(where, "content part lacks \"text\"");
    w.text(python_str(*t));
  }
}

std::string tools_json(const json& tools) {
  std::string out;
  python_json_into(out, tools, true);  // nlohmann::json keeps object keys sorted
  return out;
}

void tool_declare(Writer& w, const json& tools, bool lazily_added) {
  std::string body = lazily_added
                         ? "## New Tools Available\n"
                           "The system dynamically extends the toolset via lazy-loading.\n"
                           "You have access to all existing and extended tools.\n"
                           "Here are the specs for the extended tools.\n\n"
                         : "# Tools\nHere are the available tools, described in JSONSchema.\n\n";
  body += "```json\n" + tools_json(tools) + "\n```";
  w.internal("tool-declare", body);
}

const json* call_function(const json& call) {
  if (!call.is_object()) return nullptr;
  if (const json* f = member(call, "function")) return f->is_object() ? f : nullptr;
  return &call;
}

void assistant_segments(Writer& w, const json& m, bool thinking, const std::string& where) {
  if (thinking) {
    const json* reasoning = member(m, "reasoning_content");
    if (!reasoning || !truthy(*reasoning)) reasoning = member(m, "reasoning");
    w.open("think");
    if (reasoning && !reasoning->is_null()) {
      std::string r = python_str(*reasoning);
      if (!python_strip(r).empty()) w.text(r);
    }
    w.close("think");
  }
  w.open("response");
  content_segments(w, member(m, "content"), where);
  w.close("response");

  const json* calls = member(m, "tool_calls");
  if (!calls || !truthy(*calls)) return;
  if (!calls->is_array()) fail(where, "tool_calls must be an array");
  w.open("tools");
  int index = 0;
  for (auto& call : *calls) {
    index++;
    const json* fn = call_function(call);
    if (!fn) fail(where, "tool call must be an object");
    const json* name = member(*fn, "name");
    if (!name || !name->is_string()) fail(where, "tool call lacks a string name");
    w.open("call", {{"tool", name->get<std::string>()}, {"index", std::to_string(index)}});
    // Arguments in insertion order: an OpenAI arguments string is parsed here with
    // ordered_json (an object given as json has its keys sorted already).
    const json* args = member(*fn, "arguments");
    ordered_json obj = ordered_json::object();
    std::string raw_block;
    bool use_block = false;
    if (!args || args->is_null()) {
      // no arguments
    } else if (args->is_object()) {
      obj = ordered_json::parse(args->dump());
    } else if (args->is_string()) {
      const std::string& raw = args->get_ref<const std::string&>();
      if (!python_strip(raw).empty()) {
        ordered_json parsed = ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded()) {
          use_block = true, raw_block = raw;
        } else if (parsed.is_object()) {
          obj = std::move(parsed);
        } else {
          fail(where, "tool call arguments must be a JSON object");
        }
      }
    } else {
      fail(where, "tool call arguments must be an object or a JSON string");
    }
    if (use_block) {
      w.open("json", {{"type", "object"}});
      w.text(raw_block);
      w.close("json");
    } else {
      for (auto it = obj.begin(); it != obj.end(); ++it) {
        w.open("argument", {{"key", it.key()}, {"type", xtml_type(it.value())}});
        if (it.value().is_string()) {
          w.text(it.value().get<std::string>());
        } else {
          std::string v;
          python_json_into(v, it.value(), false);
          w.text(v);
        }
        w.close("argument");
      }
    }
    w.close("call");
  }
  w.close("tools");
}

std::string role_of(const json& m, size_t i) {
  if (!m.is_object()) fail(where_msg(i), "message must be an object");
  const json* role = member(m, "role");
  if (!role || !role->is_string()) fail(where_msg(i), "message lacks a string \"role\"");
  std::string r = role->get<std::string>();
  if (r == "developer") r = "system";
  if (r != "system" && r != "user" && r != "assistant" && r != "tool")
    fail(where_msg(i), "unknown role \"" + r + "\"");
  return r;
}

std::vector<json> normalize_tool_results(const json& messages) {
  std::vector<json> out;
  // call id -> (1-based position, function name or null)
  std::vector<std::pair<std::string, std::pair<size_t, json>>> ids;
  auto lookup = [&](const std::string& id) -> const std::pair<size_t, json>* {
    for (auto& [k, v] : ids)
      if (k == id) return &v;
    return nullptr;
  };
  size_t i = 0;
  while (i < messages.size()) {
    const json& m = messages[i];
    std::string role = role_of(m, i);
    if (role == "assistant") {
      ids.clear();
      const json* calls = member(m, "tool_calls");
      if (calls && calls->is_array()) {
        size_t pos = 0;
        for (auto& call : *calls) {
          pos++;
          const json* id = member(call, "id");
          if (!id || id->is_null() || lookup(python_str(*id))) continue;
          const json* fn = call_function(call);
          const json* name = fn ? member(*fn, "name") : nullptr;
          ids.push_back({python_str(*id), {pos, name && !name->is_null() ? json(python_str(*name)) : json()}});
        }
      }
    }
    if (role != "tool") {
      out.push_back(m);
      i++;
      continue;
    }
    struct Run {
      size_t pos;
      size_t offset;
      json msg;
      json name;
    };
    std::vector<Run> run;
    bool resolved = true;
    for (size_t offset = 0; i < messages.size() && role_of(messages[i], i) == "tool"; i++, offset++) {
      const json& t = messages[i];
      const json* id = member(t, "tool_call_id");
      if (!id) id = member(t, "id");
      const std::pair<size_t, json>* hit = (id && !id->is_null()) ? lookup(python_str(*id)) : nullptr;
      if (!hit) resolved = false;
      run.push_back({hit ? hit->first : 0, offset, t, hit ? hit->second : json()});
    }
    if (resolved) {
      std::stable_sort(run.begin(), run.end(), [](auto& a, auto& b) { return a.pos < b.pos; });
      for (auto& r : run) {
        if (!r.name.is_null()) {
          r.msg["tool"] = r.name;
          if (r.msg.contains("name")) r.msg["name"] = r.name;
        }
      }
    }
    for (auto& r : run) out.push_back(std::move(r.msg));
  }
  return out;
}

}  // namespace sluice::text
