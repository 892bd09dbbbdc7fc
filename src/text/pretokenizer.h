// text/pretokenizer.h — splits text into pre-tokens with a tiktoken split pattern, via PCRE2.
//
// tiktoken patterns are written for Rust's regex/fancy-regex. PCRE2 (10.42) reads
// a few constructs differently, so the pattern is translated first:
//   - `[A&&[^B]]` class intersection (PCRE2 has none): when A is a union of
//     general categories it becomes one negated class `[^<other categories>B]`
//     (the categories partition Unicode), otherwise a lookahead `(?:(?=[^B])[A])`;
//   - a bare script `\p{Han}` means Script=Han in Rust but Script_Extensions in
//     PCRE2 >= 10.40, so it becomes `\p{sc=Han}`;
//   - `\s` is Unicode White_Space in Rust; PCRE2's UCP `\s` also takes U+180E, so
//     it becomes `[\t-\r\x{85}\p{Z}]`.
// The pattern is compiled with UTF + UCP and JIT-compiled when the CPU allows.
// Matching follows tiktoken: leftmost-first matches, searched from the end of the
// previous match; text no alternative matches is skipped (none is for K3's pattern).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;

namespace sluice::text {

// The pre-tokenizer pattern of Kimi K3 (spec §6.2), in tiktoken's own syntax.
extern const char* const kK3Pattern;

// Rust-regex pattern -> PCRE2 pattern (see above). Throws sluice::Error on syntax
// that cannot be translated (class difference `--`, a negated class inside a union).
std::string translate_pattern(std::string_view pattern);

struct Pretokenizer {
  explicit Pretokenizer(std::string_view pattern);  // throws sluice::Error
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;
  ~Pretokenizer();

  const std::string& pattern() const { return pattern_; }
  const std::string& pcre2_pattern() const { return translated_; }

 private:
  friend struct PieceMatcher;
  std::string pattern_, translated_;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

// Iterates the pre-tokens of one valid UTF-8 string. Owns its PCRE2 match data,
// so one matcher per thread; reset() reuses it for the next string.
struct PieceMatcher {
  explicit PieceMatcher(const Pretokenizer& pre);
  PieceMatcher(const PieceMatcher&) = delete;
  PieceMatcher& operator=(const PieceMatcher&) = delete;
  ~PieceMatcher();

  void reset(std::string_view valid_utf8);
  // Next piece as [begin, end) byte offsets into the string; false at the end.
  bool next(size_t* begin, size_t* end);

 private:
  const Pretokenizer& pre_;
  pcre2_real_match_data_8* md_ = nullptr;
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace sluice::text
