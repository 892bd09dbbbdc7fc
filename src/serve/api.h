// serve/api.h — the OpenAI wire format: errors for the client (requests: request.h, replies: response.h).
//
// serve/ is sluice's OpenAI-compatible HTTP server:
//   api.h        errors for the client
//   request.h    request parsing/validation (pure: callable without a server)
//   response.h   the JSON of replies (no I/O)
//   scheduler.h  one generation at a time, a bounded FIFO line, 429 beyond it
//   socket.h     is the client still there? (cancelling abandoned generations)
//   server.h     the HTTP routes (cpp-httplib), SSE streaming, shutdown
//
// Parsing is strict, like OpenAI's own API: a field sluice does not know is
// refused ("Unrecognized request argument"), a known field it cannot honour
// (n > 1, penalties, images, audio, logit_bias, ...) is refused naming the
// field, and every refusal is an ApiError with the status and body OpenAI would
// send. Fields that change nothing about the output (user, metadata, ...) are
// accepted.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::serve {

using json = nlohmann::json;

// An error for the client: {"error":{"message","type","param","code"}} with `status`.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};
json error_body(const ApiError& e);
[[noreturn]] void refuse(const std::string& param, const std::string& message, const std::string& code = "invalid_value");

// json::dump that cannot throw: ill-formed UTF-8 becomes U+FFFD.
std::string dump(const json& j);

}  // namespace sluice::serve
