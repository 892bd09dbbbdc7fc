// serve/request_log.h — the one line per request the server writes on stderr.
//
// Every request that reaches the server ends in exactly one line (answered,
// refused, 429, cancelled, failed): plain `key=value` words by default, or one
// JSON object per line with --log-format json. Fields not measured for a
// request (a GET has no tokens) are left out. Every line, the server's other
// messages too (log_message), starts with (text) or carries as "time" (JSON)
// an ISO 8601 UTC timestamp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::serve {

struct RequestLog {
  std::string time;      // when the line is written (log_time()); empty: none
  std::string id;        // the reply's id (chatcmpl-..., resp_...), when one was made
  std::string method, path, remote;
  int status = 0;
  std::string outcome;   // ok | cancelled | busy | refused | failed | deduplicated (empty: from status)
  std::string error;     // the error code or message sent, if any
  bool stream = false;
  int prompt_tokens = -1, cached_tokens = -1, completion_tokens = -1;
  double seconds = -1;       // arrival to the end of the reply
  double queue_wait = -1;    // waiting for the model
  double ttft = -1;          // arrival to the first generated token
  double tokens_per_second = -1;  // decode
  int64_t bytes_read = -1;   // expert bytes read from files for this request
  double cache_hit_rate = -1;     // expert cache hits / spans fetched, for this request
  std::vector<std::string> warnings;  // e.g. vendor fields ignored in lenient mode

  // "2026-12-05T08:50:00.123Z sluice serve: POST /v1/chat/completions 200 ok prompt=12 ...": values
  // with spaces are quoted (error="The prompt is ..."), control characters escaped.
  std::string text() const;
  std::string json_line() const;  // {"time":...,"event":"request",...}
};

// Now in UTC, ISO 8601 with milliseconds: "2026-12-05T08:50:00.123Z".
std::string log_time();
// One of the server's own messages (start, load, warnings, failures) as a log line:
// "TIME sluice serve: MESSAGE", or {"time":...,"event":"message","message":...} when json.
std::string message_line(const std::string& message, bool json);
// Writes message_line() and a newline to stderr in one write.
void log_message(const std::string& message, bool json);

}  // namespace sluice::serve
