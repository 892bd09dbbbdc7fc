// The HTTP client's response handling (hub/http_response.h): status lines,
// Content-Range / Content-Length / Retry-After, and the body checked against
// what was asked, as libcurl would hand them to HttpClient.
// Input: byte 0 picks the request (0 get(), 1 get_range(), 2 download() whose
// restart is allowed), then u16 file size, u16 offset, u16 length (each taken
// modulo what fits), then lines: "B<bytes>" is a body chunk, any other line a
// header line (sent with "\r\n"). Whatever the server says, the sink gets
// bytes in order, without gaps, only inside what was asked (after a restart:
// the whole file from 0), and get() never collects more than its bound.
#include <cstring>

#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "hub/http_response.h"

using namespace sluice;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 7) return 0;
  const int mode = data[0] % 3;
  uint16_t v[3];
  std::memcpy(v, data + 1, 6);
  const uint64_t file_size = mode == 0 ? ~uint64_t(0) : uint64_t(v[0]) + 1;
  const uint64_t offset = mode == 0 ? 0 : v[1] % file_size;
  const uint64_t length = mode == 1 ? 1 + v[2] % (file_size - offset) : file_size - offset;

  uint64_t want_from = offset, want_end = offset + length, next = offset;
  const ByteSink sink = [&](uint64_t pos, const uint8_t*, size_t n) {
    if (pos != next || pos < want_from || pos + n > want_end) __builtin_trap();
    next += n;
  };
  const std::function<void()> restart = [&] {
    want_from = next = 0;
    want_end = file_size;
  };
  std::string text;
  HttpAttempt a;
  a.pos = offset;
  a.end = offset + length;
  a.file_size = file_size;
  if (mode == 0) {
    a.text = &text;
    a.max_text = 64;
  } else {
    a.sink = &sink;
    a.ranged = !(offset == 0 && length == file_size);
    if (mode == 2) a.restart = &restart;
  }

  std::string_view rest = fuzz::as_text(data + 7, size - 7);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.empty() && line[0] == 'B') {
      const size_t n = line.size() - 1;
      const size_t took = http_body_bytes(a, line.data() + 1, n);
      if (took != n) {
        if (took != 0 || (a.fatal.empty() && !a.bad_status && !a.sink_error)) __builtin_trap();
        break;  // the transfer is aborted
      }
    } else {
      http_header_line(a, std::string(line) + "\r\n");
    }
  }
  if (mode == 0 && (text.size() > a.max_text || a.delivered != text.size())) __builtin_trap();
  if (mode != 0 && (a.pos != next || a.delivered > a.received)) __builtin_trap();
  return 0;
}
