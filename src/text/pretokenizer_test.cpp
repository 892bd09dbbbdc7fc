#include "text/pretokenizer.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace sluice::text {
namespace {

std::vector<std::string> split(const Pretokenizer& pre, std::string_view text) {
  PieceMatcher m(pre);
  m.reset(text);
  std::vector<std::string> out;
  size_t b, e;
  while (m.next(&b, &e)) out.emplace_back(text.substr(b, e - b));
  return out;
}

using V = std::vector<std::string>;

const Pretokenizer& k3() {
  static Pretokenizer pre(kK3Pattern);
  return pre;
}

TEST(Pretokenizer, TranslatesIntersectionScriptsAndWhitespace) {
  std::string p = translate_pattern(kK3Pattern);
  EXPECT_EQ(p.find("&&"), std::string::npos) << p;
  EXPECT_NE(p.find(R"([\p{sc=Han}]+)"), std::string::npos) << p;
  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] is the complement of the other
  // categories and Han.
  EXPECT_NE(p.find(R"([^\p{C}\p{N}\p{P}\p{S}\p{Z}\p{Ll}\p{sc=Han}])"), std::string::npos) << p;
  EXPECT_NE(p.find(R"([^\p{C}\p{N}\p{P}\p{S}\p{Z}\p{Lt}\p{Lu}\p{sc=Han}])"), std::string::npos) << p;
  EXPECT_NE(p.find(R"([^\t-\r\x{85}\p{Z}\p{L}\p{N}])"), std::string::npos) << p;
  EXPECT_NE(p.find(R"([\t-\r\x{85}\p{Z}]+(?![^\t-\r\x{85}\p{Z}]))"), std::string::npos) << p;
  // Patterns without these constructs pass through unchanged.
  EXPECT_EQ(translate_pattern(R"('s|\p{L}+|\p{N}{1,3}| ?[^\r\n]+)"), R"('s|\p{L}+|\p{N}{1,3}| ?[^\r\n]+)");
}

TEST(Pretokenizer, K3Words) {
  EXPECT_EQ(split(k3(), "Hello, world!"), (V{"Hello", ",", " world", "!"}));
  // Contractions attach to the word, case-insensitively.
  EXPECT_EQ(split(k3(), "don't DON'T We'LL"), (V{"don't", " DON'T", " We'LL"}));
  EXPECT_EQ(split(k3(), "camelCaseWords HTTPServer"), (V{"camel", "Case", "Words", " HTTPServer"}));
  EXPECT_EQ(split(k3(), "snake_case"), (V{"snake", "_case"}));
  // (?i) uses Unicode simple case folding, as Rust's regex does: 'ſ (U+017F) is 's.
  EXPECT_EQ(split(k3(), "it'ſ it'x"), (V{"it'ſ", " it", "'x"}));
}

TEST(Pretokenizer, K3Numbers) {
  EXPECT_EQ(split(k3(), "12345 3.14"), (V{"123", "45", " ", "3", ".", "14"}));
  EXPECT_EQ(split(k3(), "x٣٤٥٦"), (V{"x", "٣٤٥", "٦"}));  // Arabic-Indic digits are \p{N}
}

TEST(Pretokenizer, K3Whitespace) {
  // All but the last whitespace char, then the last char joins a word...
  EXPECT_EQ(split(k3(), "a   b"), (V{"a", "  ", " b"}));
  // ...or stands alone before a digit.
  EXPECT_EQ(split(k3(), "a  1"), (V{"a", " ", " ", "1"}));
  EXPECT_EQ(split(k3(), "a  !"), (V{"a", " ", " !"}));
  EXPECT_EQ(split(k3(), "x\n\n  y"), (V{"x", "\n\n", " ", " y"}));
  EXPECT_EQ(split(k3(), "end   "), (V{"end", "   "}));  // a trailing run stays whole
  EXPECT_EQ(split(k3(), "a.\n\nb"), (V{"a", ".\n\n", "b"}));
  // U+180E is not White_Space (Unicode >= 6.3, Rust's \s) although PCRE2's \s takes it.
  EXPECT_EQ(split(k3(), "a\u180E b"), (V{"a", "\u180E", " b"}));
  // U+0085 is White_Space: the run before a digit splits like spaces do.
  EXPECT_EQ(split(k3(), "1\u0085\u00851"), (V{"1", "\u0085", "\u0085", "1"}));
}

TEST(Pretokenizer, K3HanIsSeparateFromOtherLetters) {
  EXPECT_EQ(split(k3(), "中文abc"), (V{"中文", "abc"}));
  EXPECT_EQ(split(k3(), "abc中文"), (V{"abc", "中文"}));
  EXPECT_EQ(split(k3(), "ひらがな漢字カタカナ"), (V{"ひらがな", "漢字", "カタカナ"}));
  // 々 (U+3005) is Lm with Script=Han: the Han run takes it, the letter classes do not.
  EXPECT_EQ(split(k3(), "人々x々"), (V{"人々", "x", "々"}));
  // 、(U+3001) has Han only in its Script_Extensions: \p{Han} means Script=Han
  // (tiktoken's Rust regex), so it is punctuation, not part of the Han run.
  EXPECT_EQ(split(k3(), "中文、"), (V{"中文", "、"}));
  EXPECT_EQ(split(k3(), " 中"), (V{" ", "中"}));
  EXPECT_EQ(split(k3(), "Ωμέγα й"), (V{"Ωμέγα", " й"}));
}

TEST(Pretokenizer, EmojiAndMarks) {
  EXPECT_EQ(split(k3(), "hi 👋🏽!"), (V{"hi", " 👋🏽!"}));
  EXPECT_EQ(split(k3(), "cafe\u0301s"), (V{"cafe\u0301s"}));
}

TEST(Pretokenizer, GenericIntersectionAndGaps) {
  Pretokenizer cats(R"([\p{L}&&[^a-z]]+)");
  EXPECT_EQ(split(cats, "abcXYZdéf"), (V{"XYZ", "é"}));
  // An operand that is not a union of categories uses a lookahead.
  Pretokenizer range(R"([a-z&&[^aeiou]]+)");
  EXPECT_NE(range.pcre2_pattern().find("(?="), std::string::npos);
  EXPECT_EQ(split(range, "hello world"), (V{"h", "ll", "w", "rld"}));
  // Text no alternative matches is skipped, as tiktoken does.
  Pretokenizer digits(R"(\d+)");
  EXPECT_EQ(split(digits, "a12b345"), (V{"12", "345"}));
  Pretokenizer empty(R"(x*)");
  EXPECT_EQ(split(empty, "abxxc"), (V{"xx"}));
}

TEST(Pretokenizer, RejectsUnsupportedSyntax) {
  EXPECT_THROW(Pretokenizer(R"([a-z--b])"), Error);
  EXPECT_THROW(Pretokenizer(R"([abc)"), Error);
  EXPECT_THROW(Pretokenizer(R"((unclosed)"), Error);
}

TEST(Pretokenizer, LongRunsMatchWithoutStackTrouble) {
  for (std::string unit : {" ", "a", "Z", "中", "!", "7", "\n", "é"}) {
    std::string s;
    for (int i = 0; i < 25000; i++) s += unit;
    s += "x";
    std::vector<std::string> pieces = split(k3(), s);
    std::string joined;
    for (auto& p : pieces) joined += p;
    EXPECT_EQ(joined, s) << unit;
  }
}

}  // namespace
}  // namespace sluice::text
