// serve/request_log.h — the one line per request the server writes on stderr.
//
// Every request that reaches the server ends in exactly one line (answered,
// refused, 429, cancelled, failed): plain `key=value` words by default, or one
// JSON object per line with --log-format json. Fields not measured for a
// request (a GET has no tokens) are left out.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::serve {

struct RequestLog {
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

  std::string text() const;  // "sluice serve: POST /v1/chat/completions 200 ok prompt=12 ..."
  std::string json_line() const;  // {"event":"request",...}
};

}  // namespace sluice::serve
