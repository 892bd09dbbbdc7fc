// text/chat.cpp — XTML rendering, reply splitting and tool-call parsing (see chat.h).
#include "text/chat.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "text/utf8.h"

namespace sluice::text {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr std::string_view kOpen = "<|open|>", kClose = "<|close|>", kSep = "<|sep|>",
                           kEndOfMsg = "<|end_of_msg|>";

// ---- Python-compatible text ----

// repr(float): shortest round-trip digits; exponent form when the decimal
// exponent is < -4 or >= 16 (CPython's float_repr_style "short").
std::string python_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (s[0] == '-') sign = "-", s.erase(0, 1);
  size_t e = s.find('e');
  int exp10 = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int decpt = exp10 + 1;  // value = 0.<digits> * 10^decpt
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (decpt <= 0) {
    out = "0." + std::string(size_t(-decpt), '0') + digits;
  } else if (size_t(decpt) >= digits.size()) {
    out = digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return sign + out;
}

void python_string_literal(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

template <class Json>
void python_json_into(std::string& out, const Json& v, bool compact) {
  switch (v.type()) {
    case Json::value_t::null: out += "null"; break;
    case Json::value_t::boolean: out += v.template get<bool>() ? "true" : "false"; break;
    case Json::value_t::number_integer: out += std::to_string(v.template get<int64_t>()); break;
    case Json::value_t::number_unsigned: out += std::to_string(v.template get<uint64_t>()); break;
    case Json::value_t::number_float: out += python_float(v.template get<double>()); break;
    case Json::value_t::string: python_string_literal(out, v.template get_ref<const std::string&>()); break;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (auto& item : v) {
        if (!first) out += compact ? "," : ", ";
        first = false;
        python_json_into(out, item, compact);
      }
      out += ']';
      break;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += compact ? "," : ", ";
        first = false;
        python_string_literal(out, it.key());
        out += compact ? ":" : ": ";
        python_json_into(out, it.value(), compact);
      }
      out += '}';
      break;
    }
    default: throw Error("chat: cannot serialize a binary or discarded JSON value");
  }
}

// Python str(value) for attribute values and text parts.
template <class Json>
std::string python_str(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string: return v.template get<std::string>();
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return v.template get<bool>() ? "True" : "False";
    default: {
      std::string out;
      python_json_into(out, v, false);
      return out;
    }
  }
}

// Python's truthiness of a JSON value.
bool truthy(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return false;
    case json::value_t::boolean: return v.get<bool>();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return v.get<double>() != 0.0;
    case json::value_t::string: return !v.get_ref<const std::string&>().empty();
    default: return !v.empty();
  }
}

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// Python str.strip(): removes leading/trailing whitespace characters.
std::string python_strip(std::string_view s) {
  auto* u = reinterpret_cast<const unsigned char*>(s.data());
  size_t b = 0, e = s.size();
  while (b < e) {
    Utf8Step st = utf8_step(u + b, e - b);
    if (st.kind != Utf8Kind::valid || !python_isspace(st.codepoint)) break;
    b += st.len;
  }
  while (e > b) {  // step back over one character
    size_t k = e - 1;
    while (k > b && (u[k] & 0xC0) == 0x80 && e - k < 4) k--;
    Utf8Step st = utf8_step(u + k, e - k);
    if (st.kind != Utf8Kind::valid || k + st.len != e || !python_isspace(st.codepoint)) break;
    e = k;
  }
  return std::string(s.substr(b, e - b));
}

// ---- segment writer ----

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

// The function object of a tool call ({"function": {...}} or the call itself).
const json* call_function(const json& call) {
  if (!call.is_object()) return nullptr;
  if (const json* f = member(call, "function")) return f->is_object() ? f : nullptr;
  return &call;
}

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

// Reorders each run of tool results to the order of the preceding assistant's
// tool_calls when every result's tool_call_id resolves, and names each result
// after its call. Returns the messages in rendering order.
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

}  // namespace

std::string python_json(const json& v, bool compact) {
  std::string out;
  python_json_into(out, v, compact);
  return out;
}

std::string python_json(const ordered_json& v, bool compact) {
  std::string out;
  python_json_into(out, v, compact);
  return out;
}

// ---- rendering ----

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

std::vector<int> render_chat(const Tokenizer& tok, const json& messages, const ChatOptions& opt) {
  std::vector<int> ids;
  for (auto& s : chat_segments(messages, opt)) {
    if (s.special)
      ids.push_back(tok.require_special(s.text));
    else
      tok.encode_into(s.text, /*allow_special=*/false, ids);
  }
  return ids;
}

std::vector<int> chat_stop_ids(const Tokenizer& tok) {
  std::vector<int> ids = {tok.require_special(kEndOfMsg)};
  if (int eos = tok.special_id("[EOS]"); eos >= 0) ids.push_back(eos);
  return ids;
}

// ---- reply splitting ----

namespace {

const std::string kThinkEnd = "<|close|>think<|sep|>";
const std::string kResponseOpen = "<|open|>response<|sep|>";
// Anything after the response channel: its close, a tools block, the message end.
const std::vector<std::string> kContentEnds = {"<|close|>response<|sep|>", "<|open|>tools<|sep|>",
                                               "<|close|>message<|sep|>", "<|end_of_msg|>", "[EOS]"};
const std::vector<std::string> kReasoningEnds = {"<|close|>message<|sep|>", "<|end_of_msg|>", "[EOS]"};

struct Found {
  size_t at = std::string::npos;  // earliest full marker
  size_t len = 0;
  size_t hold = std::string::npos;  // start of a trailing partial marker
};

Found find_markers(const std::string& buf, const std::vector<const std::string*>& markers) {
  Found f;
  for (const std::string* m : markers) {
    size_t at = buf.find(*m);
    if (at != std::string::npos && at < f.at) f.at = at, f.len = m->size();
    // Longest proper prefix of m that ends buf.
    for (size_t k = std::min(m->size() - 1, buf.size()); k > 0; k--) {
      if (buf.compare(buf.size() - k, k, *m, 0, k) == 0) {
        f.hold = std::min(f.hold, buf.size() - k);
        break;
      }
    }
  }
  return f;
}

}  // namespace

ReplyStream::ReplyStream(bool thinking) : phase_(thinking ? Phase::reasoning : Phase::content) {}

ReplyStream::Delta ReplyStream::push(std::string_view text) {
  buf_ += text;
  return advance(false);
}

ReplyStream::Delta ReplyStream::finish() {
  Delta d = advance(true);
  parts_.tool_calls = parse_tool_calls(parts_.tail);
  return d;
}

ReplyStream::Delta ReplyStream::advance(bool final) {
  Delta d;
  while (true) {
    if (phase_ == Phase::tail) {
      parts_.tail += buf_;
      buf_.clear();
      return d;
    }
    if (phase_ == Phase::response_open) {  // skip <|open|>response<|sep|> right after </think>
      if (buf_.compare(0, kResponseOpen.size(), kResponseOpen) == 0) {
        buf_.erase(0, kResponseOpen.size());
      } else if (!final && buf_.size() < kResponseOpen.size() &&
                 kResponseOpen.compare(0, buf_.size(), buf_) == 0) {
        return d;  // might still become the marker
      }
      phase_ = Phase::content;
      continue;
    }
    std::vector<const std::string*> markers;
    if (phase_ == Phase::reasoning) markers.push_back(&kThinkEnd);
    for (auto& m : phase_ == Phase::reasoning ? kReasoningEnds : kContentEnds) markers.push_back(&m);
    Found f = find_markers(buf_, markers);
    std::string& channel = phase_ == Phase::reasoning ? parts_.reasoning : parts_.content;
    std::string& delta = phase_ == Phase::reasoning ? d.reasoning : d.content;
    if (f.at != std::string::npos) {
      std::string piece = buf_.substr(0, f.at);
      channel += piece, delta += piece;
      bool think_end = phase_ == Phase::reasoning && buf_.compare(f.at, f.len, kThinkEnd) == 0;
      if (think_end) {
        buf_.erase(0, f.at + f.len);
        parts_.reasoning_done = true;
        phase_ = Phase::response_open;
      } else {
        buf_.erase(0, f.at);  // the marker starts the tail
        phase_ = Phase::tail;
      }
      continue;
    }
    size_t keep = final ? buf_.size() : std::min(f.hold, buf_.size());
    channel.append(buf_, 0, keep), delta.append(buf_, 0, keep);
    buf_.erase(0, keep);
    return d;
  }
}

ReplyParts split_reasoning(std::string_view reply, bool thinking) {
  ReplyStream rs(thinking);
  rs.push(reply);
  rs.finish();
  return rs.parts();
}

// ---- tool calls ----

namespace {

struct XtmlTag {
  bool open = false;
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
};

std::string xml_unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s.compare(i, 6, "&quot;") == 0)
      out += '"', i += 5;
    else if (s.compare(i, 5, "&amp;") == 0)
      out += '&', i += 4;
    else
      out += s[i];
  }
  return out;
}

// Parses `<|open|>name k="v"...<|sep|>` or `<|close|>name<|sep|>` at pos.
bool parse_tag(std::string_view s, size_t* pos, XtmlTag* tag) {
  bool open = s.compare(*pos, kOpen.size(), kOpen) == 0;
  bool close = !open && s.compare(*pos, kClose.size(), kClose) == 0;
  if (!open && !close) return false;
  size_t b = *pos + (open ? kOpen.size() : kClose.size());
  size_t e = s.find(kSep, b);
  if (e == std::string_view::npos) return false;
  std::string_view body = s.substr(b, e - b);
  tag->open = open;
  tag->attrs.clear();
  size_t sp = body.find(' ');
  tag->name = std::string(body.substr(0, sp));
  while (sp != std::string_view::npos) {
    size_t eq = body.find("=\"", sp);
    if (eq == std::string_view::npos) break;
    size_t endq = body.find('"', eq + 2);
    if (endq == std::string_view::npos) break;
    tag->attrs.push_back({std::string(body.substr(sp + 1, eq - sp - 1)),
                          xml_unescape(body.substr(eq + 2, endq - eq - 2))});
    sp = body.find(' ', endq);
  }
  *pos = e + kSep.size();
  return true;
}

std::string attr(const XtmlTag& t, const char* key) {
  for (auto& [k, v] : t.attrs)
    if (k == key) return v;
  return "";
}

}  // namespace

json parse_tool_calls(std::string_view s) {
  json calls = json::array();
  size_t pos = s.find("<|open|>tools<|sep|>");
  if (pos == std::string_view::npos) return calls;
  pos += std::string_view("<|open|>tools<|sep|>").size();
  XtmlTag tag;
  while (pos < s.size()) {
    size_t next = s.find("<|", pos);
    if (next == std::string_view::npos) break;
    pos = next;
    if (!parse_tag(s, &pos, &tag)) {
      pos += 2;
      continue;
    }
    if (!tag.open && tag.name == "tools") break;
    if (!tag.open || tag.name != "call") continue;
    std::string name = attr(tag, "tool"), index = attr(tag, "index");
    ordered_json args = ordered_json::object();
    std::string raw_args;
    bool raw = false;
    // Children until </call>.
    while (pos < s.size()) {
      size_t t = s.find("<|", pos);
      if (t == std::string_view::npos) {
        pos = s.size();
        break;
      }
      pos = t;
      XtmlTag child;
      if (!parse_tag(s, &pos, &child)) {
        pos += 2;
        continue;
      }
      if (!child.open && child.name == "call") break;
      if (!child.open || (child.name != "argument" && child.name != "json")) continue;
      std::string closing = std::string(kClose) + child.name + std::string(kSep);
      size_t end = s.find(closing, pos);
      std::string_view value = s.substr(pos, end == std::string_view::npos ? s.size() - pos : end - pos);
      pos = end == std::string_view::npos ? s.size() : end + closing.size();
      if (child.name == "json") {
        raw = true, raw_args = std::string(value);
        continue;
      }
      std::string key = attr(child, "key"), type = attr(child, "type");
      if (type == "string") {
        args[key] = std::string(value);
      } else {
        ordered_json v = ordered_json::parse(value, nullptr, false);
        args[key] = v.is_discarded() ? ordered_json(std::string(value)) : v;
      }
    }
    calls.push_back({{"id", "call_" + (index.empty() ? std::to_string(calls.size() + 1) : index)},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", raw ? raw_args : args.dump()}}}});
  }
  return calls;
}

}  // namespace sluice::text
