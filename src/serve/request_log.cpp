#include "serve/request_log.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace sluice::serve {

namespace {

std::string outcome_of(const RequestLog& r) {
  if (!r.outcome.empty()) return r.outcome;
  if (r.status == 429) return "busy";
  if (r.status >= 500) return "failed";
  if (r.status >= 400) return "refused";
  return "ok";
}

std::string fixed(double v, int digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A value for the text form: one word, control characters and spaces escaped.
std::string word(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c == ' ' || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string RequestLog::text() const {
  std::string s = "sluice serve: " + word(method) + " " + word(path) + " " + std::to_string(status) + " " +
                  outcome_of(*this);
  if (!id.empty()) s += " id=" + word(id);
  if (stream) s += " stream=1";
  if (prompt_tokens >= 0) s += " prompt=" + std::to_string(prompt_tokens);
  if (cached_tokens >= 0) s += " cached=" + std::to_string(cached_tokens);
  if (completion_tokens >= 0) s += " completion=" + std::to_string(completion_tokens);
  if (queue_wait >= 0) s += " queue_s=" + fixed(queue_wait, 3);
  if (ttft >= 0) s += " ttft_s=" + fixed(ttft, 3);
  if (tokens_per_second >= 0) s += " tok_s=" + fixed(tokens_per_second, 2);
  if (bytes_read >= 0) s += " bytes_read=" + std::to_string(bytes_read);
  if (cache_hit_rate >= 0) s += " hit_rate=" + fixed(cache_hit_rate, 3);
  if (seconds >= 0) s += " total_s=" + fixed(seconds, 3);
  if (!remote.empty()) s += " client=" + word(remote);
  if (!error.empty()) s += " error=" + word(error);
  for (auto& w : warnings) s += " warning=" + word(w);
  return s;
}

std::string RequestLog::json_line() const {
  nlohmann::json j = {{"event", "request"}, {"method", method}, {"path", path}, {"status", status},
                      {"outcome", outcome_of(*this)}};
  if (!id.empty()) j["id"] = id;
  if (stream) j["stream"] = true;
  if (prompt_tokens >= 0) j["prompt_tokens"] = prompt_tokens;
  if (cached_tokens >= 0) j["cached_tokens"] = cached_tokens;
  if (completion_tokens >= 0) j["completion_tokens"] = completion_tokens;
  if (queue_wait >= 0) j["queue_wait_s"] = queue_wait;
  if (ttft >= 0) j["ttft_s"] = ttft;
  if (tokens_per_second >= 0) j["tokens_per_s"] = tokens_per_second;
  if (bytes_read >= 0) j["bytes_read"] = bytes_read;
  if (cache_hit_rate >= 0) j["cache_hit_rate"] = cache_hit_rate;
  if (seconds >= 0) j["total_s"] = seconds;
  if (!remote.empty()) j["client"] = remote;
  if (!error.empty()) j["error"] = error;
  if (!warnings.empty()) j["warnings"] = warnings;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sluice::serve
