#include "serve/api.h"

namespace sluice::serve {

json error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

void refuse(const std::string& param, const std::string& message, const std::string& code) {
  throw ApiError{400, message, "invalid_request_error", param, code};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
}  // namespace sluice::serve
