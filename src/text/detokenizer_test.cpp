#include "text/detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"

namespace sluice::text {
namespace {

const Tokenizer& tiny() {
  static Tokenizer tok = Tokenizer::load(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  return tok;
}

TEST(StreamDecoder, HoldsPartialCharacters) {
  const Tokenizer& t = tiny();
  std::vector<int> ids = t.encode("中");  // one byte token per UTF-8 byte in the tiny vocabulary
  ASSERT_EQ(ids.size(), 3u);
  StreamDecoder d(t);
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.pending(), 1u);
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.push(ids[2]), "中");
  EXPECT_EQ(d.pending(), 0u);
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, FlushReleasesAnUnfinishedCharacter) {
  const Tokenizer& t = tiny();
  std::vector<int> ids = t.encode("a中");
  StreamDecoder d(t);
  std::string out;
  for (size_t i = 0; i + 1 < ids.size(); i++) out += d.push(ids[i]);
  EXPECT_EQ(out, "a");
  EXPECT_EQ(d.flush(), "\uFFFD");
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, SpecialsShownOrHidden) {
  const Tokenizer& t = tiny();
  std::vector<int> ids = t.encode("中", false);
  StreamDecoder shown(t, true), hidden(t, false);
  std::string a, b;
  a += shown.push(ids[0]), b += hidden.push(ids[0]);
  a += shown.push(450), b += hidden.push(450);  // <|end_of_msg|> cuts the character short
  a += shown.flush(), b += hidden.flush();
  EXPECT_EQ(a, "\uFFFD<|end_of_msg|>");
  EXPECT_EQ(b, "\uFFFD");
  EXPECT_THROW(shown.push(9999), Error);
}

TEST(StreamDecoder, ConcatenationEqualsDecode) {
  const Tokenizer& t = tiny();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; trial++) {
    std::vector<int> ids;
    size_t n = rng() % 40;
    for (size_t i = 0; i < n; i++) ids.push_back(int(rng() % (trial % 2 ? t.vocab_size() : t.n_ranks())));
    for (bool show : {true, false}) {
      StreamDecoder d(t, show);
      std::string out;
      for (int id : ids) {
        std::string piece = d.push(id);
        out += piece;
        EXPECT_LE(d.pending(), 3u);
      }
      out += d.flush();
      EXPECT_EQ(out, t.decode(ids, show));
    }
  }
  // Valid text decodes back exactly however it is cut into tokens.
  std::string text = "Grüße, 世界! 👋🏽 done";
  StreamDecoder d(t);
  std::string out;
  for (int id : t.encode(text)) out += d.push(id);
  EXPECT_EQ(out + d.flush(), text);
}

}  // namespace
}  // namespace sluice::text
