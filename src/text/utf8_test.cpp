#include "text/utf8.h"

#include <gtest/gtest.h>

namespace sluice::text {
namespace {

Utf8Step step(std::string_view s) {
  return utf8_step(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

TEST(Utf8, Steps) {
  EXPECT_EQ(step("a").kind, Utf8Kind::valid);
  Utf8Step euro = step("\xE2\x82\xAC");
  EXPECT_EQ(euro.kind, Utf8Kind::valid);
  EXPECT_EQ(euro.len, 3u);
  EXPECT_EQ(euro.codepoint, U'€');
  EXPECT_EQ(step("\xF0\x9F\x98\x80").codepoint, U'😀');
  EXPECT_EQ(step("\xE2\x82").kind, Utf8Kind::truncated);
  EXPECT_EQ(step("\xE2\x82").len, 2u);
  EXPECT_EQ(step("\xE2\x82x").kind, Utf8Kind::invalid);
  EXPECT_EQ(step("\xE2\x82x").len, 2u);  // maximal subpart
  EXPECT_EQ(step("\xC0\x80").len, 1u);   // overlong lead
  EXPECT_EQ(step("\xED\xA0\x80").len, 1u);  // surrogate
  EXPECT_EQ(step("\xF4\x90\x80\x80").len, 1u);  // > U+10FFFF
  EXPECT_EQ(step("\x80").kind, Utf8Kind::invalid);
}

TEST(Utf8, LossyMatchesPythonReplace) {
  EXPECT_EQ(utf8_lossy("plain ascii"), "plain ascii");
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x98z"), "a\uFFFDz");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(utf8_lossy("\xFF\xFE"), "\uFFFD\uFFFD");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(utf8_valid_prefix("abcdefghij\xC3\xA9xyz\xFF"), 15u);
}

TEST(Utf8, PythonIsSpace) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\v', U'\f', U'\r', U'\x1C', U'\x1F', U'\x85', U'\xA0',
                     U'\u1680', U'\u2000', U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'})
    EXPECT_TRUE(python_isspace(c)) << uint32_t(c);
  for (char32_t c : {U'a', U'\x1B', U'\u180E', U'\u200B', U'\uFEFF', U'\x7F'})
    EXPECT_FALSE(python_isspace(c)) << uint32_t(c);
}

}  // namespace
}  // namespace sluice::text
