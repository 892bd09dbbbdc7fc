// hub/http_client.h — HTTP GETs of small files and of byte ranges, with retries.
//
// One HttpClient owns one libcurl easy handle and so one keep-alive connection
// (per host); it is used by one thread at a time. Redirects are followed (the
// hub sends large files to a CDN); an Authorization header set by the caller is
// not forwarded to another host (libcurl's rule), which is what the hub's
// signed CDN URLs expect.
//
// Transient failures are retried with exponential backoff (plus jitter, or the
// server's Retry-After): 5xx, 408, 429, timeouts, refused or reset connections,
// and transfers cut short. A cut transfer resumes with a Range request from the
// first byte not yet delivered, so bytes already handed to the sink are never
// fetched again. The retry budget counts consecutive attempts that delivered
// nothing or averaged below the minimum rate, so a link that keeps dropping but
// keeps making progress finishes, and one that trickles gives up.
// Everything else (4xx, a Content-Range that does not match what was asked, a
// server that ignores Range where that is not allowed, a local error thrown by
// the sink) throws sluice::Error at once, naming the URL.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "base/error.h"

namespace sluice {

// The retries ran out: the server could not be reached, or kept failing. The
// caller knows where the URL came from and can say what to check.
struct HttpGaveUp : Error {
  using Error::Error;
};

// Told about a retry: the URL, the failures in a row, the tolerated number,
// what went wrong, and the delay before the next attempt.
using RetryHook =
    std::function<void(const std::string& url, int failures, int retries, const std::string& problem, int delay_ms)>;

struct HttpOptions {
  std::string bearer_token;   // "Authorization: Bearer <token>" when non-empty
  int connect_timeout_s = 10;
  int stall_timeout_s = 30;   // abort an attempt that receives nothing for this long
  // ...or that averages below low_speed_bytes_per_s over low_speed_window_s (a
  // hub trickling a byte every few seconds never trips the stall check). An
  // attempt cut short that averaged below it (its wait included) counts as a
  // failed attempt too, so a transfer never goes on for long below this rate.
  long low_speed_bytes_per_s = 1024;
  int low_speed_window_s = 60;
  int retries = 6;            // failed attempts in a row (no byte delivered) tolerated after the first
  int backoff_ms = 250;       // delay before the first retry; doubles on each failure in a row
  int max_backoff_ms = 8000;
  // Told about each retry before its delay (may be empty; called on the
  // transfer's thread).
  RetryHook on_retry;
};

struct HttpCounters {
  uint64_t body_bytes = 0;  // response body bytes received (all attempts, error bodies included)
  uint64_t requests = 0;    // attempts made (a followed redirect counts once)
  uint64_t retries = 0;     // attempts that were repeated after a transient failure
};

// Receives bytes in order; `pos` is their absolute offset in the remote file.
// May throw (a local write error); that aborts the transfer without retrying.
using ByteSink = std::function<void(uint64_t pos, const uint8_t* data, size_t n)>;

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // The whole body of `url` (status 200), at most max_bytes long.
  std::string get(const std::string& url, uint64_t max_bytes = 64ull << 20);

  // Bytes [offset, offset + length) of the file at `url`, whose size is
  // `file_size`, delivered to `sink` in order. Each attempt must be answered
  // with 206 and a Content-Range starting where asked and naming file_size as
  // the total; a server that answers 200 (ignores Range) is refused, so a
  // request for one span never turns into a download of the whole file.
  void get_range(const std::string& url, uint64_t offset, uint64_t length, uint64_t file_size, const ByteSink& sink);

  // Downloads the file at `url` (size file_size) from `offset` to its end. A
  // server that ignores Range (200 to a resumed request) is handled: restart()
  // is called and the whole body is delivered from position 0.
  void download(const std::string& url, uint64_t offset, uint64_t file_size, const ByteSink& sink,
                const std::function<void()>& restart);

  const HttpCounters& counters() const { return counters_; }
  // Where the last request ended up after redirects (e.g. a CDN URL).
  const std::string& effective_url() const { return effective_url_; }

 private:
  // get() collects into `text`; the others deliver to `sink`.
  void transfer(const std::string& url, uint64_t offset, uint64_t length, uint64_t file_size, const ByteSink* sink,
                const std::function<void()>* restart, std::string* text, uint64_t max_text);
  void backoff(int failures, long retry_after_s, const std::string& url, const std::string& problem);

  HttpOptions opt_;
  void* curl_ = nullptr;     // CURL*
  void* headers_ = nullptr;  // curl_slist*
  HttpCounters counters_;
  std::string effective_url_;
  uint64_t jitter_state_;
};

// "%XX"-escapes every byte outside [A-Za-z0-9._~-]; '/' is kept when keep_slash.
std::string url_escape(const std::string& s, bool keep_slash);

// Parses a Content-Range value "bytes FIRST-LAST/TOTAL" (TOTAL may be "*": total = ~0).
bool parse_content_range(const std::string& value, uint64_t* first, uint64_t* last, uint64_t* total);

}  // namespace sluice
