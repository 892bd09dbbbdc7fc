// text/python_text.h — Python-compatible spellings the chat template relies on:
// json.dumps(ensure_ascii=False), str(value), truthiness and str.strip(). Internal
// to text/ (python_json, the public entry, is declared in chat.h).
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sluice::text {

// Appends json.dumps(v) with default (", ", ": ") or compact separators.
void python_json_into(std::string& out, const nlohmann::json& v, bool compact);
void python_json_into(std::string& out, const nlohmann::ordered_json& v, bool compact);
// Python str(value), for attribute values and text parts.
std::string python_str(const nlohmann::json& v);
// Python's truthiness of a JSON value.
bool truthy(const nlohmann::json& v);
// obj[key] when obj is an object holding key, else nullptr.
const nlohmann::json* member(const nlohmann::json& obj, const char* key);
// Python str.strip(): removes leading/trailing whitespace characters.
std::string python_strip(std::string_view s);

}  // namespace sluice::text
