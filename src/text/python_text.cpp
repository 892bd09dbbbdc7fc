// text/python_text.cpp — Python-compatible text (see python_text.h).
#include "text/python_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "text/chat.h"
#include "text/utf8.h"

namespace sluice::text {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

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
void dumps_into(std::string& out, const Json& v, bool compact) {
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
        dumps_into(out, item, compact);
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
        dumps_into(out, it.value(), compact);
      }
      out += '}';
      break;
    }
    default: throw Error("chat: cannot serialize a binary or discarded JSON value");
  }
}

}  // namespace

std::string python_str(const json& v) {
  switch (v.type()) {
    case json::value_t::string: return v.get<std::string>();
    case json::value_t::null: return "None";
    case json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    default: {
      std::string out;
      python_json_into(out, v, false);
      return out;
    }
  }
}

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

void python_json_into(std::string& out, const json& v, bool compact) { dumps_into(out, v, compact); }
void python_json_into(std::string& out, const ordered_json& v, bool compact) {
  dumps_into(out, v, compact);
}

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

}  // namespace sluice::text
