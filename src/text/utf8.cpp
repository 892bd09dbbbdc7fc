// text/utf8.cpp — see utf8.h.
#include "text/utf8.h"

#include <cstring>

namespace sluice::text {

Utf8Step utf8_step(const unsigned char* p, size_t n) {
  unsigned char b0 = p[0];
  if (b0 < 0x80) return {Utf8Kind::valid, 1, b0};
  // Expected length and the allowed range of the second byte (Unicode Table 3-7).
  uint32_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Kind::invalid, 1, 0};
  }
  for (uint32_t i = 1; i < need; i++) {
    if (i >= n) return {Utf8Kind::truncated, i, 0};
    unsigned char b = p[i];
    if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return {Utf8Kind::invalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Kind::valid, need, cp};
}

size_t utf8_valid_prefix(std::string_view s) {
  auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    // ASCII fast path, eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    Utf8Step st = utf8_step(p + i, n - i);
    if (st.kind != Utf8Kind::valid) return i;
    i += st.len;
  }
  return n;
}

std::string utf8_lossy(std::string_view s) {
  size_t valid = utf8_valid_prefix(s);
  if (valid == s.size()) return std::string(s);
  std::string out(s.substr(0, valid));
  auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = valid;
  while (i < s.size()) {
    Utf8Step st = utf8_step(p + i, s.size() - i);
    if (st.kind == Utf8Kind::valid)
      out.append(s.data() + i, st.len);
    else
      out += "\xEF\xBF\xBD";
    i += st.len;
  }
  return out;
}

bool python_isspace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

}  // namespace sluice::text
