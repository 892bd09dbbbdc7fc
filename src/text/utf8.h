// text/utf8.h — UTF-8 scanning shared by the encoder, the decoder and the chat code.
//
// One primitive, utf8_step(), classifies the bytes at a position as a complete
// code point, an ill-formed sequence (its "maximal subpart", which lossy
// decoding replaces by one U+FFFD, as Python and WHATWG do) or a sequence cut
// short by the end of the buffer (which a streaming decoder must hold back).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::text {

enum class Utf8Kind : uint8_t { valid, invalid, truncated };

struct Utf8Step {
  Utf8Kind kind;
  uint32_t len;        // bytes consumed (>= 1 when the input is not empty)
  char32_t codepoint;  // only meaningful when kind == valid
};

// Classifies the bytes starting at p (n > 0 bytes available).
Utf8Step utf8_step(const unsigned char* p, size_t n);

// Length of the longest prefix of s that is valid UTF-8.
size_t utf8_valid_prefix(std::string_view s);

// s with every ill-formed sequence (including a truncated tail) replaced by U+FFFD.
std::string utf8_lossy(std::string_view s);

// Python's str.isspace(): the White_Space characters plus U+001C..U+001F.
// K3's safety splitter (tokenization_kimi.py) classifies characters with it.
bool python_isspace(char32_t c);

}  // namespace sluice::text
