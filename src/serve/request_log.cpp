#include "serve/request_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

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

// A value for the text form: one word, or a quoted string when it holds spaces or
// quotes (logfmt's way: readable, still one field); control characters escaped.
std::string word(const std::string& s) {
  bool quote = false;
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == '"' || c == '\\') {
      quote = true;
      out += '\\';
      out += char(c);
    } else {
      quote = quote || c == ' ' || c == '=';
      out += char(c);
    }
  }
  if (quote) return '"' + out + '"';
  return out.empty() ? "-" : out;
}

}  // namespace

std::string RequestLog::text() const {
  std::string s = time.empty() ? "" : time + " ";
  s += "sluice serve: " + word(method) + " " + word(path) + " " + std::to_string(status) + " " + outcome_of(*this);
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
  if (!time.empty()) j["time"] = time;
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

std::string log_time() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", int(ms));
  return buf;
}

std::string message_line(const std::string& message, bool json) {
  if (!json) return log_time() + " sluice serve: " + message;
  nlohmann::json j = {{"time", log_time()}, {"event", "message"}, {"message", message}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void log_message(const std::string& message, bool json) {
  const std::string line = message_line(message, json) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace sluice::serve
