// text/tool_calls.cpp — parsing a reply's tools block into OpenAI tool_calls
// (parse_tool_calls; see chat.h).
#include "base/json_parse.h"
#include "text/chat.h"
#include "text/utf8.h"
#include "text/xtml.h"

namespace sluice::text {

using nlohmann::json;
using nlohmann::ordered_json;

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

// A model can write any bytes: every string taken from the reply goes through
// utf8_lossy (ill-formed sequences become U+FFFD), so the calls always
// serialize as JSON.
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
    std::string name = utf8_lossy(attr(tag, "tool")), index = utf8_lossy(attr(tag, "index"));
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
        raw = true, raw_args = utf8_lossy(value);
        continue;
      }
      std::string key = utf8_lossy(attr(child, "key")), type = attr(child, "type");
      if (type == "string") {
        args[key] = utf8_lossy(value);
      } else {
        // Parsed only when shallow: a value is data, not a nesting bomb.
        const bool deep = json_too_deep(value, kMaxJsonDepth);
        ordered_json v = deep ? ordered_json() : ordered_json::parse(value, nullptr, false);
        args[key] = deep || v.is_discarded() ? ordered_json(utf8_lossy(value)) : v;
      }
    }
    calls.push_back({{"id", "call_" + (index.empty() ? std::to_string(calls.size() + 1) : index)},
                     {"type", "function"},
                     {"function", {{"name", name}, {"arguments", raw ? raw_args : args.dump()}}}});
  }
  return calls;
}

}  // namespace sluice::text
