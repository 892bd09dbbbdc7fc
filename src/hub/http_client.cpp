#include "hub/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "hub/http_response.h"

namespace sluice {

namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error("libcurl: global initialisation failed");
  });
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) i++;
  return s.substr(i);
}

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = uint64_t(c - '0');
    if (v > (~uint64_t(0) - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool transient_status(long s) { return s >= 500 || s == 408 || s == 429; }

bool transient_curl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

// Decides, at the first body byte of the final response, whether to take it.
// Returns false to abort the transfer.
bool accept_response(HttpAttempt& a) {
  a.body_started = true;
  if (a.text) {
    if (a.status != 200) return a.bad_status = true, false;
    return true;
  }
  if (a.status == 206) {
    if (!a.have_range) return a.fatal = "206 response without a Content-Range", false;
    if (a.cr_first != a.pos || a.cr_last < a.cr_first || a.cr_last >= a.end)
      return a.fatal = "asked for bytes " + std::to_string(a.pos) + "-" + std::to_string(a.end - 1) +
                       ", the server sent " + std::to_string(a.cr_first) + "-" + std::to_string(a.cr_last),
             false;
    if (a.cr_total != ~uint64_t(0) && a.cr_total != a.file_size)
      return a.fatal = "the file is " + std::to_string(a.cr_total) + " bytes on the server, expected " +
                       std::to_string(a.file_size) + " (changed since the file list was read?)",
             false;
    a.resp_end = a.cr_last + 1;
    return true;
  }
  if (a.status == 200) {
    if (a.have_length && a.content_length != a.file_size)
      return a.fatal = "the file is " + std::to_string(a.content_length) + " bytes on the server, expected " +
                       std::to_string(a.file_size) + " (changed since the file list was read?)",
             false;
    if (a.ranged) {
      if (!a.restart)
        return a.fatal = "the server ignores Range requests (200 instead of 206); streaming experts needs "
                         "a server that supports Range",
               false;
      try {
        (*a.restart)();
      } catch (...) {
        a.sink_error = std::current_exception();
        return false;
      }
      a.pos = 0;
      a.end = a.file_size;
    }
    a.resp_end = a.file_size;
    return true;
  }
  a.bad_status = true;
  return false;
}

size_t on_header(char* buf, size_t size, size_t n, void* user) {
  http_header_line(*static_cast<HttpAttempt*>(user), std::string_view(buf, size * n));
  return size * n;
}

size_t on_body(char* buf, size_t size, size_t n, void* user) {
  return http_body_bytes(*static_cast<HttpAttempt*>(user), buf, size * n);
}

// Called by libcurl at least once a second: aborts an attempt that has
// received nothing for stall_timeout_s (libcurl's own low-speed check averages
// over several seconds, so a burst followed by silence goes unnoticed too long).
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  HttpAttempt& a = *static_cast<HttpAttempt*>(user);
  if (std::chrono::steady_clock::now() - a.last_data > std::chrono::seconds(a.stall_timeout_s)) {
    a.stalled = true;
    return 1;
  }
  return 0;
}

}  // namespace

void http_header_line(HttpAttempt& a, std::string_view text) {
  a.last_data = std::chrono::steady_clock::now();
  std::string line(text);
  if (line.rfind("HTTP/", 0) == 0) {
    a.status = 0;
    a.have_range = a.have_length = a.body_started = false;
    a.retry_after_s = -1;
    size_t sp = line.find(' ');
    if (sp != std::string::npos) a.status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return;
  std::string key = line.substr(0, colon);
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  std::string value = trim(line.substr(colon + 1));
  if (key == "content-range") {
    a.have_range = parse_content_range(value, &a.cr_first, &a.cr_last, &a.cr_total);
    if (!a.have_range) a.fatal = "unreadable Content-Range '" + value + "'";
  } else if (key == "content-length") {
    a.have_length = parse_u64(value, &a.content_length);
  } else if (key == "retry-after") {
    uint64_t s;
    if (parse_u64(value, &s)) a.retry_after_s = long(std::min<uint64_t>(s, 60));
  }
}

size_t http_body_bytes(HttpAttempt& a, const char* buf, size_t len) {
  a.last_data = std::chrono::steady_clock::now();
  a.received += len;
  if (a.status / 100 == 3 || a.status / 100 == 1) return len;  // body of a followed redirect
  if (!a.body_started && !accept_response(a)) return 0;
  if (a.text) {
    if (a.text->size() + len > a.max_text) {
      a.fatal = "response is larger than " + std::to_string(a.max_text) + " bytes";
      return 0;
    }
    a.text->append(buf, len);
    a.delivered += len;
    return len;
  }
  if (a.pos + len > a.resp_end) {
    a.fatal = "the server sent more bytes than its headers announced";
    return 0;
  }
  try {
    (*a.sink)(a.pos, reinterpret_cast<const uint8_t*>(buf), len);
  } catch (...) {
    a.sink_error = std::current_exception();
    return 0;
  }
  a.pos += len;
  a.delivered += len;
  return len;
}

std::string url_escape(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '~' || c == '-' || (keep_slash && c == '/')) {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

bool parse_content_range(const std::string& value, uint64_t* first, uint64_t* last, uint64_t* total) {
  if (value.rfind("bytes ", 0) != 0) return false;
  std::string rest = trim(value.substr(6));
  size_t dash = rest.find('-'), slash = rest.find('/');
  if (dash == std::string::npos || slash == std::string::npos || dash > slash) return false;
  std::string t = rest.substr(slash + 1);
  if (!parse_u64(rest.substr(0, dash), first) || !parse_u64(rest.substr(dash + 1, slash - dash - 1), last))
    return false;
  if (t == "*") *total = ~uint64_t(0);
  else if (!parse_u64(t, total)) return false;
  return *first <= *last;
}

HttpClient::HttpClient(HttpOptions options) : opt_(std::move(options)) {
  init_curl_once();
  CURL* c = curl_easy_init();
  if (!c) throw Error("libcurl: cannot create a handle");
  curl_ = c;
  curl_slist* h = nullptr;
  if (!opt_.bearer_token.empty()) h = curl_slist_append(h, ("Authorization: Bearer " + opt_.bearer_token).c_str());
  headers_ = h;
  jitter_state_ = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
}

HttpClient::~HttpClient() {
  curl_slist_free_all(static_cast<curl_slist*>(headers_));
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

std::string HttpClient::get(const std::string& url, uint64_t max_bytes) {
  std::string text;
  transfer(url, 0, 0, ~uint64_t(0), nullptr, nullptr, &text, max_bytes);
  return text;
}

void HttpClient::get_range(const std::string& url, uint64_t offset, uint64_t length, uint64_t file_size,
                           const ByteSink& sink) {
  if (length == 0) return;
  if (offset + length > file_size)
    fail(url, "range " + std::to_string(offset) + "+" + std::to_string(length) + " runs past the file's " +
                  std::to_string(file_size) + " bytes");
  transfer(url, offset, length, file_size, &sink, nullptr, nullptr, 0);
}

void HttpClient::download(const std::string& url, uint64_t offset, uint64_t file_size, const ByteSink& sink,
                          const std::function<void()>& restart) {
  if (offset > file_size) fail(url, "resume offset is past the end of the file");
  if (offset == file_size) return;
  transfer(url, offset, file_size - offset, file_size, &sink, &restart, nullptr, 0);
}

void HttpClient::backoff(int failures, long retry_after_s, const std::string& url, const std::string& problem) {
  int64_t ms = opt_.backoff_ms;
  for (int i = 1; i < failures && ms < opt_.max_backoff_ms; i++) ms *= 2;
  ms = std::min<int64_t>(ms, opt_.max_backoff_ms);
  // Up to +25% jitter so that many clients retrying together spread out.
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  ms += int64_t(jitter_state_ % uint64_t(ms / 4 + 1));
  if (retry_after_s >= 0) ms = std::max<int64_t>(ms, int64_t(retry_after_s) * 1000);
  if (opt_.on_retry) opt_.on_retry(url, failures, opt_.retries, problem, int(ms));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void HttpClient::transfer(const std::string& url, uint64_t offset, uint64_t length, uint64_t file_size,
                          const ByteSink* sink, const std::function<void()>* restart, std::string* text,
                          uint64_t max_text) {
  CURL* c = static_cast<CURL*>(curl_);
  uint64_t pos = offset;
  uint64_t end = offset + length;
  int failures = 0;  // attempts in a row that delivered nothing, or too little
  std::string last_problem;
  // Where the current attempt's time starts: the end of the one before, so
  // the wait before it counts too.
  auto since = std::chrono::steady_clock::now();
  for (;;) {
    HttpAttempt a;
    a.pos = pos;
    a.end = end;
    a.file_size = file_size;
    a.sink = sink;
    a.restart = restart;
    a.text = text;
    a.max_text = max_text;
    if (text) text->clear();
    // A Range header unless the whole file is wanted (get(), or a download from byte 0).
    a.ranged = !text && !(pos == 0 && end == file_size);
    std::string range = a.ranged ? std::to_string(pos) + "-" + std::to_string(end - 1) : "";

    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(headers_));
    curl_easy_setopt(c, CURLOPT_RANGE, a.ranged ? range.c_str() : nullptr);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, long(opt_.connect_timeout_s));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, opt_.low_speed_bytes_per_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, long(opt_.low_speed_window_s));
    a.stall_timeout_s = opt_.stall_timeout_s;
    a.last_data = std::chrono::steady_clock::now();
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &a);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sluice-setup/1");
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);

    CURLcode rc = curl_easy_perform(c);
    counters_.requests++;
    counters_.body_bytes += a.received;
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
    char* eff = nullptr;
    effective_url_ = curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff ? eff : url;

    if (a.sink_error) std::rethrow_exception(a.sink_error);
    if (!a.fatal.empty()) fail(url, a.fatal);
    pos = a.pos;
    end = a.end;  // a restart (server ignored Range) widens the request to the whole file

    const long status = a.status;
    const std::string curl_problem = std::string(curl_easy_strerror(rc)) + (errbuf[0] ? std::string(": ") + errbuf : "");
    if (rc == CURLE_OK && !a.bad_status && (status == 200 || status == 206)) {
      if (text || pos == end) return;
      // The response ended early but consistently with its own headers (a short
      // 206): ask again for the rest.
      last_problem = "short response (" + std::to_string(a.delivered) + " bytes)";
    } else if (a.bad_status || rc == CURLE_OK) {
      if (!transient_status(status))
        fail(url, "HTTP " + std::to_string(status) +
                      (status == 401 || status == 403
                           ? " (is a token set, HF_TOKEN or $HF_HOME/token, and valid for this repository?)"
                           : ""));
      last_problem = "HTTP " + std::to_string(status);
    } else if (a.stalled) {
      last_problem = "no data for " + std::to_string(opt_.stall_timeout_s) + " s";
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
      last_problem = "slower than " + std::to_string(opt_.low_speed_bytes_per_s) + " bytes/s for " +
                     std::to_string(opt_.low_speed_window_s) + " s";
    } else if (transient_curl(rc)) {
      last_problem = curl_problem;
    } else {
      fail(url, curl_problem);
    }
    // A get() restarts from scratch; a ranged transfer goes on from `pos`.
    // A trickle counts as a failure even though it delivered something: one
    // attempt that ran below the minimum rate (libcurl's low-speed check), or
    // one cut short having averaged below it, its wait included (a server
    // that sends a few hundred bytes and drops the connection, again and
    // again, would otherwise be resumed for hours: the overall rate across
    // retries is held to the same minimum).
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::max(1e-3, std::chrono::duration<double>(now - since).count());
    since = now;
    const bool slow = opt_.low_speed_bytes_per_s > 0 && double(a.delivered) / secs < double(opt_.low_speed_bytes_per_s);
    if (slow && a.delivered > 0 && rc != CURLE_OPERATION_TIMEDOUT)
      last_problem += "; averaged " + std::to_string(uint64_t(double(a.delivered) / secs)) +
                      " bytes/s since the attempt before, below the minimum of " +
                      std::to_string(opt_.low_speed_bytes_per_s) + " bytes/s";
    if (a.delivered > 0 && !text && rc != CURLE_OPERATION_TIMEDOUT && !slow) failures = 0;
    else failures++;
    if (failures > opt_.retries)
      throw HttpGaveUp(url + ": giving up after " + std::to_string(failures) + " failed attempts in a row: " +
                       last_problem);
    counters_.retries++;
    if (failures > 0) backoff(failures, a.retry_after_s, url, last_problem);
  }
}

}  // namespace sluice
