// hub/http_response.h — the response side of one HttpClient attempt.
//
// What HttpClient does with the server's header lines and body bytes, apart
// from libcurl (which only calls these two functions): the status and the
// Content-Range / Content-Length / Retry-After headers are read, and at the
// first body byte the response is taken or refused against what was asked
// (the range, the file's size). Bytes reach the sink in order and only inside
// [pos, end) of the request; anything else sets `fatal` (not retried) or
// `bad_status`. Pure, so tests and fuzz/http_response drive it directly.
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include "hub/http_client.h"

namespace sluice {

// What one attempt (one curl_easy_perform) asked for and saw.
struct HttpAttempt {
  // Request.
  uint64_t pos = 0;            // next byte to deliver (absolute)
  uint64_t end = 0;            // one past the last byte wanted
  uint64_t file_size = 0;      // ~0 when unknown (get())
  bool ranged = false;         // a Range header was sent
  const ByteSink* sink = nullptr;
  const std::function<void()>* restart = nullptr;
  std::string* text = nullptr;  // get(): collects the body here
  uint64_t max_text = 0;

  // Response (the last one: redirects reset it).
  long status = 0;
  bool have_range = false;
  uint64_t cr_first = 0, cr_last = 0, cr_total = 0;
  bool have_length = false;
  uint64_t content_length = 0;
  long retry_after_s = -1;
  bool body_started = false;
  uint64_t resp_end = 0;        // one past the last byte this response may carry

  // Stall detection: the time of the last byte (header or body) received.
  std::chrono::steady_clock::time_point last_data;
  int stall_timeout_s = 30;
  bool stalled = false;

  // Outcome.
  uint64_t delivered = 0;
  uint64_t received = 0;
  std::string fatal;            // a protocol problem: not retried
  bool bad_status = false;      // aborted on an error status
  std::exception_ptr sink_error;
};

// One header line as libcurl hands it over ("HTTP/1.1 206 Partial Content\r\n",
// "Content-Range: bytes 0-9/100\r\n", ...). A status line starts a new response.
void http_header_line(HttpAttempt& a, std::string_view line);

// Body bytes: returns how many were taken; less than n aborts the transfer
// (`fatal`, `bad_status` or `sink_error` says why).
size_t http_body_bytes(HttpAttempt& a, const char* data, size_t n);

}  // namespace sluice
