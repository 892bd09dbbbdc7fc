// base/escape.h — making untrusted bytes safe to print on one line.
//
// Error messages quote untrusted bytes (tensor names, JSON keys, file names
// from a hub). Where a message reaches a terminal (the CLI's "sluice: ..."
// line) it goes through escape_control: control characters are spelled out,
// so the message stays one line and a downloaded file cannot write escape
// sequences to the user's terminal. Overlong messages are cut.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace sluice {

// Control characters (C0, DEL) as \n, \t, \r or \xHH; at most max_bytes of
// input are kept ("..." marks a cut). Other bytes pass unchanged.
inline std::string escape_control(std::string_view s, size_t max_bytes = 2000) {
  std::string out;
  const size_t n = s.size() > max_bytes ? max_bytes : s.size();
  out.reserve(n + 8);
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != 0x7f) {
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  if (n < s.size()) out += "...";
  return out;
}

}  // namespace sluice
