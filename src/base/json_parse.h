// base/json_parse.h — parsing untrusted JSON text (model files, hub answers,
// requests) into nlohmann::json with sluice's own error messages.
//
// Nesting is capped before the parser runs (a 100 MiB run of '[' would
// otherwise build a 100-million-deep document), and the library's exception
// text ("[json.exception.parse_error.101] ...") is rewritten into
// "where: invalid JSON: <problem>".
#pragma once
#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sluice {

inline constexpr int kMaxJsonDepth = 64;

// The parsed document, or sluice::Error naming `where`.
nlohmann::json parse_json(std::string_view text, const std::string& where, int max_depth = kMaxJsonDepth);

// Nesting depth of arrays/objects in `text` exceeds max_depth (strings skipped).
bool json_too_deep(std::string_view text, int max_depth);

// nlohmann's exception text without its "[json.exception.<kind>.<id>] " prefix.
std::string json_problem(const std::exception& e);

}  // namespace sluice
