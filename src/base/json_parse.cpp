#include "base/json_parse.h"

#include "base/error.h"

namespace sluice {

bool json_too_deep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  return false;
}

std::string json_problem(const std::exception& e) {
  std::string s = e.what();
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t end = s.find("] ");
    if (end != std::string::npos) s.erase(0, end + 2);
  }
  return s;
}

namespace {

template <class Json>
Json parse_checked(std::string_view text, const std::string& where, int max_depth) {
  if (json_too_deep(text, max_depth))
    fail(where, "not valid JSON: nested deeper than " + std::to_string(max_depth) + " levels");
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail(where, "not valid JSON: " + json_problem(e));
  }
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& where, int max_depth) {
  return parse_checked<nlohmann::json>(text, where, max_depth);
}

}  // namespace sluice
