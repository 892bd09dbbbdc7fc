#include "text/tokenizer.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <random>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sluice::text {
namespace {

const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny";

const Tokenizer& tiny() {
  static Tokenizer tok = Tokenizer::load(kFixture + "/model");
  return tok;
}

std::string temp_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("sluice_text_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}

std::string base64(std::string_view bytes) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t w = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int k = 3; k >= 0; k--) out += a[(w >> (6 * k)) & 63];
  }
  if (bytes.size() - i == 1) {
    uint32_t w = uint8_t(bytes[i]) << 16;
    out += a[w >> 18], out += a[(w >> 12) & 63], out += "==";
  } else if (bytes.size() - i == 2) {
    uint32_t w = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += a[w >> 18], out += a[(w >> 12) & 63], out += a[(w >> 6) & 63], out += '=';
  }
  return out;
}

std::string tiktoken_file(const std::vector<std::string>& tokens) {
  std::string out;
  for (size_t r = 0; r < tokens.size(); r++) out += base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return out;
}

std::vector<std::string> byte_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; b++) t.push_back(std::string(1, char(b)));
  return t;
}

// Throws sluice::Error whose message contains every one of `parts`.
template <class Fn>
void expect_error(Fn fn, std::vector<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// ---- the fixture ----

TEST(Tokenizer, FixtureCasesGiveExactIds) {
  std::ifstream f(kFixture + "/tokenizer_cases.json");
  ASSERT_TRUE(f) << "missing fixture tokenizer_cases.json";
  nlohmann::json cases = nlohmann::json::parse(f);
  EXPECT_EQ(cases["pre_tokenizer_pattern"].get<std::string>(), std::string(kK3Pattern));
  ASSERT_GE(cases["cases"].size(), 16u);
  for (auto& c : cases["cases"]) {
    std::string text = c["text"];
    bool special = c["parse_special"];
    std::vector<int> expected = c["tokens"];
    EXPECT_EQ(tiny().encode(text, special), expected) << text << " special=" << special;
    EXPECT_EQ(tiny().decode(expected), text);
  }
}

TEST(Tokenizer, FixtureSpecialTokens) {
  const Tokenizer& t = tiny();
  EXPECT_EQ(t.n_ranks(), 448);
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.special_id("[BOS]"), 448);
  EXPECT_EQ(t.special_id("[EOS]"), 449);
  EXPECT_EQ(t.special_id("<|end_of_msg|>"), 450);
  EXPECT_EQ(t.special_id("<|open|>"), 451);
  EXPECT_EQ(t.special_id("<|close|>"), 452);
  EXPECT_EQ(t.special_id("<|sep|>"), 453);
  EXPECT_EQ(t.special_id("[PAD]"), 511);
  EXPECT_EQ(t.special_id("<|reserved_token_456|>"), 456);
  EXPECT_EQ(t.special_id("nope"), -1);
  EXPECT_TRUE(t.is_special(448));
  EXPECT_FALSE(t.is_special(447));
  EXPECT_FALSE(t.is_special(512));
  EXPECT_EQ(t.token_bytes(450), "<|end_of_msg|>");
  EXPECT_THROW(t.token_bytes(512), Error);
  EXPECT_THROW(t.token_bytes(-1), Error);
  expect_error([&] { t.require_special("<|nope|>"); }, {"<|nope|>"});
  std::vector<int> ids = {39, 450, 68};
  EXPECT_EQ(t.decode(ids, true), "H<|end_of_msg|>e");
  EXPECT_EQ(t.decode(ids, false), "He");
}

TEST(Tokenizer, UnlistedReservedIdsAreSpelledByNumber) {
  std::string dir = temp_dir();
  write_file(dir + "/tiktoken.model", tiktoken_file(byte_tokens()));
  write_file(dir + "/tokenizer_config.json",
             R"({"added_tokens_decoder": {"256": {"content": "[BOS]"}, "258": {"content": "<|x|>"}},
                 "num_reserved_special_tokens": 4})");
  Tokenizer t = Tokenizer::load(dir);
  EXPECT_EQ(t.vocab_size(), 260);
  EXPECT_EQ(t.token_bytes(257), "<|reserved_token_257|>");
  EXPECT_EQ(t.token_bytes(259), "<|reserved_token_259|>");
  EXPECT_EQ(t.encode("a<|reserved_token_259|>", true), (std::vector<int>{'a', 259}));
  // K3 reserves 256 ids when the config does not say otherwise.
  write_file(dir + "/tokenizer_config.json", R"({"added_tokens_decoder": {}})");
  EXPECT_EQ(Tokenizer::load(dir).vocab_size(), 256 + 256);
}

TEST(Tokenizer, SpecialsAreTextUnlessAllowed) {
  const Tokenizer& t = tiny();
  std::vector<int> plain = t.encode("<|open|>");
  EXPECT_GT(plain.size(), 1u);
  for (int id : plain) EXPECT_FALSE(t.is_special(id));
  EXPECT_EQ(t.encode("<|open|>", true), std::vector<int>{451});
  EXPECT_EQ(t.encode("<|open|><|open|>x", true), (std::vector<int>{451, 451, t.encode("x").at(0)}));
}

// ---- malformed files ----

TEST(Tokenizer, MalformedVocabularyNamesFileAndLine) {
  std::string dir = temp_dir(), path = dir + "/tiktoken.model";
  auto load = [&] { Tokenizer::from_files(path, "", kK3Pattern, true); };
  std::string good = tiktoken_file(byte_tokens());

  write_file(path, good + "!!!! 256\n");
  expect_error(load, {path + ":257", "base64"});
  write_file(path, good + base64("ab") + " 300\n");
  expect_error(load, {path + ":257", "rank 300 out of order"});
  write_file(path, good + base64("ab") + " x1\n");
  expect_error(load, {path + ":257", "bad rank"});
  write_file(path, good + base64("ab") + "\n");
  expect_error(load, {path + ":257", "expected"});
  write_file(path, good + base64("a") + " 256\n");
  expect_error(load, {path + ":257", "rank 256 repeats the token of rank 97"});
  auto missing = byte_tokens();
  missing[65] = "AB";  // byte 'A' has no token of its own
  write_file(path, tiktoken_file(missing));
  expect_error(load, {path, "byte 65"});
  write_file(path, "");
  expect_error(load, {path, "no tokens"});
  expect_error([&] { Tokenizer::from_files(dir + "/absent.model", "", kK3Pattern, true); }, {"absent.model", "cannot open"});
  // Blank lines and CRLF endings are accepted.
  write_file(path, "\n" + good + "\r\n");
  EXPECT_EQ(Tokenizer::from_files(path, "", kK3Pattern, true).n_ranks(), 256);
}

TEST(Tokenizer, MalformedConfigNamesFile) {
  std::string dir = temp_dir();
  write_file(dir + "/tiktoken.model", tiktoken_file(byte_tokens()));
  std::string cfg = dir + "/tokenizer_config.json";
  auto load = [&] { Tokenizer::load(dir); };
  write_file(cfg, "{not json");
  expect_error(load, {cfg, "not valid JSON"});
  write_file(cfg, R"({"added_tokens_decoder": {"12": {"content": "[X]"}}})");
  expect_error(load, {cfg, "\"12\"", "outside the special range"});
  write_file(cfg, R"({"added_tokens_decoder": {"256": {"content": ""}}})");
  expect_error(load, {cfg, "empty content"});
  write_file(cfg, R"({"added_tokens_decoder": {"256": {"text": "[X]"}}})");
  expect_error(load, {cfg, "content"});
  write_file(cfg, R"({"added_tokens_decoder": {"abc": {"content": "[X]"}}})");
  expect_error(load, {cfg, "not a token id"});
  write_file(cfg, R"({"added_tokens_decoder": {"256": {"content": "[X]"}, "257": {"content": "[X]"}}})");
  expect_error(load, {cfg, "[X]", "twice"});
  write_file(cfg, R"({"added_tokens_decoder": [], "num_reserved_special_tokens": 2})");
  expect_error(load, {cfg, "must be an object"});
  write_file(cfg, R"({"num_reserved_special_tokens": -1})");
  expect_error(load, {cfg, "num_reserved_special_tokens"});
  std::filesystem::remove(cfg);
  expect_error(load, {cfg, "cannot open"});
  // Not a regular file: refused at once, never a hang on a FIFO.
  ASSERT_EQ(::mkfifo(cfg.c_str(), 0644), 0);
  expect_error(load, {cfg, "not a regular file"});
  std::filesystem::remove(cfg);
  std::filesystem::remove(dir + "/tiktoken.model");
  ASSERT_EQ(::mkfifo((dir + "/tiktoken.model").c_str(), 0644), 0);
  expect_error(load, {dir + "/tiktoken.model", "not a regular file"});
}

TEST(Tokenizer, AbsurdTokenSizesAreRefused) {
  std::string dir = temp_dir();
  std::string path = dir + "/tiktoken.model";
  auto load = [&] { Tokenizer::from_files(path, "", kK3Pattern, true); };
  const std::string good = tiktoken_file(byte_tokens());
  write_file(path, good + base64(std::string(5000, 'z')) + " 256\n");
  expect_error(load, {path + ":257", "implausibly long"});
  write_file(path, good + base64("zz") + " 9999999999\n");
  expect_error(load, {path + ":257", "out of order"});
}

// ---- byte-pair merge ----

// The merge rule written as plainly as possible: rebuild all pairs each step.
std::vector<int> reference_bpe(const std::unordered_map<std::string, int>& ranks, const std::string& piece) {
  std::vector<std::string> parts;
  for (char c : piece) parts.push_back(std::string(1, c));
  while (parts.size() > 1) {
    int best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); i++) {
      auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && (best < 0 || it->second < best)) best = it->second, at = i;
    }
    if (best < 0) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + at + 1);
  }
  std::vector<int> out;
  for (auto& p : parts) out.push_back(ranks.at(p));
  return out;
}

TEST(Tokenizer, BpeHeapAndLinearMatchReference) {
  // A synthetic vocabulary over four letters with many overlapping merges, so
  // ties and long merge chains happen often.
  std::mt19937 rng(7);
  std::vector<std::string> tokens = byte_tokens();
  std::unordered_map<std::string, int> ranks;
  for (size_t r = 0; r < tokens.size(); r++) ranks[tokens[r]] = int(r);
  std::vector<std::string> pool = {"a", "b", "c", "d"};
  while (tokens.size() < 256 + 400) {
    std::string t = pool[rng() % pool.size()] + pool[rng() % pool.size()];
    if (ranks.count(t) || t.size() > 12) continue;
    ranks[t] = int(tokens.size());
    tokens.push_back(t);
    pool.push_back(t);
  }
  std::string path = temp_dir() + "/synthetic.model";
  write_file(path, tiktoken_file(tokens));
  Tokenizer t = Tokenizer::from_files(path, "", kK3Pattern, true);
  // Mostly short pieces (the linear path), some past 128 bytes (the heap path).
  for (int trial = 0; trial < 420; trial++) {
    size_t n = trial < 400 ? 2 + rng() % 140 : 129 + rng() % 200;
    std::string s;
    for (size_t i = 0; i < n; i++) s += "abcd"[rng() % (trial % 3 == 0 ? 2 : 4)];
    std::vector<int> ref = reference_bpe(ranks, s), heap, linear, any;
    t.bpe_heap(s, heap);
    t.bpe_linear(s, linear);
    t.bpe(s, any);
    ASSERT_EQ(heap, ref) << s;
    ASSERT_EQ(linear, ref) << s;
    ASSERT_EQ(any, ref) << s;
  }
}

TEST(Tokenizer, BpeOnFixtureVocabularyMatchesReference) {
  const Tokenizer& t = tiny();
  std::unordered_map<std::string, int> ranks;
  for (int r = 0; r < t.n_ranks(); r++) ranks[std::string(t.token_bytes(r))] = r;
  std::mt19937 rng(11);
  const std::string letters = "etaoinshrdlu cgm";
  for (int trial = 0; trial < 120; trial++) {
    std::string s;
    size_t n = 2 + rng() % 260;
    for (size_t i = 0; i < n; i++) s += letters[rng() % letters.size()];
    std::vector<int> heap, linear;
    t.bpe_heap(s, heap);
    t.bpe_linear(s, linear);
    ASSERT_EQ(heap, reference_bpe(ranks, s)) << s;
    ASSERT_EQ(linear, heap) << s;
  }
}

// ---- invalid UTF-8, long inputs ----

TEST(Tokenizer, InvalidUtf8BecomesByteTokens) {
  const Tokenizer& t = tiny();
  std::string s = "ab\xff" "cd\xe4\xb8 x\xc3(\xed\xa0\x80\xf4\x90\x80\x80 end\xe4\xb8";
  std::vector<int> ids = t.encode(s);
  EXPECT_EQ(t.decode_bytes(ids), s);  // exact round trip of the bytes
  // Each ill-formed byte is its own single-byte token; the valid runs around them
  // are encoded as independent texts.
  std::vector<int> expected = t.encode("ab");
  expected.push_back(t.encode(std::string("\xff")).at(0));
  for (int id : t.encode("cd")) expected.push_back(id);
  ASSERT_GE(ids.size(), expected.size());
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + expected.size()), expected);
  for (int id : ids) EXPECT_LT(id, t.n_ranks());
  EXPECT_EQ(t.decode(t.encode("\xff")), "\xEF\xBF\xBD");
  // Lossy decoding replaces each maximal ill-formed subpart with one U+FFFD.
  EXPECT_EQ(t.decode(t.encode("a\xe4\xb8z")), "a\xEF\xBF\xBDz");
  EXPECT_EQ(t.decode(t.encode("a\xed\xa0\x80z")), "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
}

TEST(Tokenizer, RandomBytesRoundTrip) {
  std::mt19937 rng(3);
  const Tokenizer& t = tiny();
  for (int trial = 0; trial < 200; trial++) {
    std::string s;
    size_t n = rng() % 200;
    for (size_t i = 0; i < n; i++) s += char(rng() % 4 ? rng() % 128 : rng() % 256);
    EXPECT_EQ(t.decode_bytes(t.encode(s, trial % 2)), s);
  }
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Tokenizer, SafetySplitCutsSameClassRunsAt25000Chars) {
  const Tokenizer& t = tiny();
  // 24,998 dots then "ing": the non-space run reaches 25,001 chars at 'g', so the
  // text is cut before it and "ing" (one token) becomes "in" + "g".
  std::string dots(24998, '.');
  std::vector<int> ids = t.encode(dots + "ing");
  EXPECT_EQ(ids, concat(t.encode(dots + "in"), t.encode("g")));
  EXPECT_EQ(t.encode("ing"), std::vector<int>{294});
  EXPECT_NE(ids.back(), 294);
  // One char shorter: no cut.
  EXPECT_EQ(t.encode(dots.substr(1) + "ing").back(), 294);
  // Whitespace runs are cut the same way; a multi-byte char counts once.
  std::string spaces(30000, ' ');
  EXPECT_EQ(t.encode(spaces + "x"), concat(t.encode(spaces.substr(0, 25000)), t.encode(spaces.substr(25000) + "x")));
  std::string ideographic;
  for (int i = 0; i < 25001; i++) ideographic += "\xE3\x80\x80";  // U+3000
  EXPECT_EQ(t.encode(ideographic),
            concat(t.encode(ideographic.substr(0, 3 * 25000)), t.encode(ideographic.substr(3 * 25000))));
}

TEST(Tokenizer, SafetySplitCutsSlicesAt400000Chars) {
  const Tokenizer& t = tiny();
  // Alternating "a " keeps every run at one char; " the" straddles char 400,000.
  std::string prefix;
  prefix.reserve(400000);
  while (prefix.size() < 399997) prefix += prefix.size() % 2 ? ' ' : 'a';
  std::string text = prefix + " the";
  std::vector<int> ids = t.encode(text);
  EXPECT_EQ(ids, concat(t.encode(prefix + " th"), t.encode("e")));
  EXPECT_EQ(std::vector<int>(ids.end() - 2, ids.end()), (std::vector<int>{257, 68}));
  EXPECT_EQ(t.encode(" the"), std::vector<int>{264});
  // Plain tiktoken vocabularies have no safety splits.
  Tokenizer plain = Tokenizer::from_files(kFixture + "/model/tiktoken.model", "", kK3Pattern, false);
  EXPECT_EQ(plain.encode(text).back(), 264);
  EXPECT_EQ(plain.encode(std::string(24998, '.') + "ing").back(), 294);
}

TEST(Tokenizer, LongPiecesAreFast) {
  // A 25,000-byte piece must not take quadratic time (the heap path).
  const Tokenizer& t = tiny();
  std::string s;
  for (int i = 0; i < 24000; i++) s += "etaoinshrd"[i * 7 % 10];
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int> ids = t.encode(s);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(t.decode(ids), s);
  EXPECT_LT(secs, 2.0);  // generous: ~10 ms in practice; quadratic would be far slower
}

}  // namespace
}  // namespace sluice::text
