// text/tokenizer.cpp — vocabulary loading, encoding and decoding (see tokenizer.h).
#include "text/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_parse.h"
#include "base/read_file.h"
#include "text/utf8.h"

namespace sluice::text {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr size_t kSliceChars = 400000;  // spec §6.2 step 1
constexpr size_t kRunChars = 25000;
constexpr size_t kLinearBpeMax = 128;  // pieces up to this many bytes use the O(n^2) scan
constexpr int kK3ReservedSpecials = 256;

// Bounds far above real vocabularies (K3: 163,840 ids, tokens of tens of bytes).
constexpr uint64_t kMaxTokenizerFileBytes = 256ull << 20;
constexpr int kMaxVocab = 1 << 24;
constexpr size_t kMaxTokenBytes = 4096;
constexpr int kMaxSpecials = 1 << 16;

inline uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t(n) * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    p += 8, n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict standard base64 with padding. Appends to out; false if malformed.
bool base64_decode(std::string_view s, std::string& out) {
  if (s.empty() || s.size() % 4 != 0) return false;
  for (size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      unsigned char c = s[i + k];
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        v[k] = 0, pad++;
        continue;
      }
      if (pad) return false;  // data after '='
      v[k] = base64_value(c);
      if (v[k] < 0) return false;
    }
    uint32_t w = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += char(w >> 16);
    if (pad < 2) out += char((w >> 8) & 0xFF);
    if (pad < 1) out += char(w & 0xFF);
  }
  return true;
}

// Python's _split_whitespaces_or_nonwhitespaces applied to 400,000-char slices
// (tokenization_kimi.py). A byte that is not valid UTF-8 counts as one
// non-space character.
template <class Fn>
void safety_split(std::string_view text, Fn&& fn) {
  if (text.size() <= kRunChars) {  // fewer chars than bytes: nothing to cut
    fn(text);
    return;
  }
  auto* u = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    size_t piece_start = i, chars = 0, run = 0;
    bool run_is_space = false;
    while (i < n && chars < kSliceChars) {
      size_t len = 1;
      bool space;
      if (u[i] < 0x80) {
        space = (u[i] >= 0x09 && u[i] <= 0x0D) || (u[i] >= 0x1C && u[i] <= 0x20);  // python_isspace
      } else {
        Utf8Step st = utf8_step(u + i, n - i);
        space = st.kind == Utf8Kind::valid && python_isspace(st.codepoint);
        if (st.kind == Utf8Kind::valid) len = st.len;
      }
      if (chars == 0) run_is_space = space;
      if (space != run_is_space) {
        run = 1, run_is_space = space;
      } else if (++run > kRunChars) {
        fn(text.substr(piece_start, i - piece_start));
        piece_start = i, run = 1;
      }
      i += len, chars++;
    }
    fn(text.substr(piece_start, i - piece_start));
  }
}

}  // namespace

// ---- rank table ----

namespace {
inline uint64_t head_bytes(const char* p, size_t n) {
  uint64_t w = 0;
  std::memcpy(&w, p, n < 8 ? n : 8);
  return w;
}
}  // namespace

uint64_t RankTable::hash(const char* p, size_t n) { return hash_bytes(p, n); }

int RankTable::find(const char* p, size_t n) const { return find_hashed(p, n, hash_bytes(p, n)); }

int RankTable::find_hashed(const char* p, size_t n, uint64_t h) const {
  uint64_t head = head_bytes(p, n);
  uint16_t len = uint16_t(n < 65535 ? n : 65535), tag = uint16_t(h >> 48);
  for (uint64_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots[i];
    if (s.len == 0) return -1;
    if (s.len == len && s.head == head && s.tag == tag) {
      if (n <= 8) return int(s.rank);
      uint32_t off = offsets[s.rank];
      if (offsets[s.rank + 1] - off == n && std::memcmp(arena.data() + off + 8, p + 8, n - 8) == 0)
        return int(s.rank);
    }
  }
}

int RankTable::build_index() {
  size_t cap = 16;
  while (cap < size_t(size()) * 2) cap <<= 1;
  slots.assign(cap, Slot{0, 0, 0, 0});
  mask = cap - 1;
  for (int r = 0; r < size(); r++) {
    std::string_view b = bytes(r);
    if (find(b.data(), b.size()) >= 0) return r;
    uint64_t h = hash_bytes(b.data(), b.size());
    uint64_t i = h & mask;
    while (slots[i].len) i = (i + 1) & mask;
    slots[i] = Slot{head_bytes(b.data(), b.size()), uint32_t(r),
                    uint16_t(b.size() < 65535 ? b.size() : 65535), uint16_t(h >> 48)};
  }
  return -1;
}

// ---- loading ----

Tokenizer Tokenizer::load(const std::string& model_dir) {
  return from_files(model_dir + "/tiktoken.model", model_dir + "/tokenizer_config.json", kK3Pattern,
                    /*safety_splits=*/true);
}

Tokenizer Tokenizer::from_files(const std::string& tiktoken_path, const std::string& config_path,
                                std::string_view pattern, bool safety_splits) {
  Tokenizer tok{Pretokenizer(pattern)};
  tok.safety_splits_ = safety_splits;
  RankTable& rt = tok.ranks_;

  std::string text = read_regular_file(tiktoken_path, kMaxTokenizerFileBytes);
  size_t pos = 0, line_no = 0;
  std::vector<size_t> line_of_rank;  // for error messages
  rt.offsets.push_back(0);
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    line_no++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    auto where = [&] { return tiktoken_path + ":" + std::to_string(line_no); };
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
      fail(where(), "expected '<base64 bytes> <rank>'");
    std::string_view b64 = line.substr(0, sp), rank_text = line.substr(sp + 1);
    long long rank = 0;
    if (rank_text.empty() || rank_text.size() > 10) fail(where(), "bad rank '" + std::string(rank_text) + "'");
    for (char c : rank_text) {
      if (c < '0' || c > '9') fail(where(), "bad rank '" + std::string(rank_text) + "'");
      rank = rank * 10 + (c - '0');
    }
    if (rank != rt.size())
      fail(where(), "rank " + std::to_string(rank) + " out of order (expected " +
                        std::to_string(rt.size()) + "; ranks must be 0..n-1 in file order)");
    size_t before = rt.arena.size();
    if (!base64_decode(b64, rt.arena)) fail(where(), "token bytes are not valid base64");
    if (rt.arena.size() == before) fail(where(), "empty token");
    if (rt.arena.size() - before > kMaxTokenBytes)
      fail(where(), "token of " + std::to_string(rt.arena.size() - before) + " bytes is implausibly long (at most " +
                        std::to_string(kMaxTokenBytes) + ")");
    if (rt.size() >= kMaxVocab) fail(where(), "more than " + std::to_string(kMaxVocab) + " tokens");
    if (rt.arena.size() > std::numeric_limits<uint32_t>::max())
      fail(tiktoken_path, "vocabulary too large");
    rt.offsets.push_back(uint32_t(rt.arena.size()));
    line_of_rank.push_back(line_no);
  }
  if (rt.size() == 0) fail(tiktoken_path, "no tokens");
  if (int dup = rt.build_index(); dup >= 0) {
    std::string_view b = rt.bytes(dup);
    fail(tiktoken_path + ":" + std::to_string(line_of_rank[dup]),
         "token of rank " + std::to_string(dup) + " repeats the token of rank " +
             std::to_string(rt.find(b.data(), b.size())));
  }
  for (int b = 0; b < 256; b++) {
    char c = char(b);
    int r = rt.find(&c, 1);
    if (r < 0) fail(tiktoken_path, "byte " + std::to_string(b) + " has no single-byte token");
    tok.byte_rank_[b] = r;
  }

  if (!config_path.empty()) {
    const nlohmann::json cfg = parse_json(read_regular_file(config_path, kMaxTokenizerFileBytes), config_path);
    if (!cfg.is_object()) fail(config_path, "expected a JSON object");
    int n_special = kK3ReservedSpecials;
    if (auto it = cfg.find("num_reserved_special_tokens"); it != cfg.end()) {
      if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > kMaxSpecials)
        fail(config_path, "num_reserved_special_tokens must be an integer in [0, " + std::to_string(kMaxSpecials) + "]");
      n_special = it->get<int>();
    }
    tok.specials_.assign(n_special, std::string());
    auto it = cfg.find("added_tokens_decoder");
    if (it != cfg.end()) {
      if (!it->is_object()) fail(config_path, "added_tokens_decoder must be an object");
      for (auto& [key, entry] : it->items()) {
        std::string where = config_path + ": added_tokens_decoder[\"" + key + "\"]";
        long long id = -1;
        if (!key.empty() && key.size() <= 10 &&
            std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }))
          id = std::stoll(key);
        if (id < 0) fail(where, "key is not a token id");
        if (id < rt.size() || id >= rt.size() + n_special)
          fail(where, "id outside the special range " + std::to_string(rt.size()) + ".." +
                          std::to_string(rt.size() + n_special - 1));
        if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string())
          fail(where, "expected an object with a string \"content\"");
        std::string content = entry["content"].get<std::string>();
        if (content.empty()) fail(where, "empty content");
        tok.specials_[id - rt.size()] = content;
      }
    }
    for (int i = 0; i < n_special; i++)
      if (tok.specials_[i].empty())
        tok.specials_[i] = "<|reserved_token_" + std::to_string(rt.size() + i) + "|>";
  }
  for (size_t i = 0; i < tok.specials_.size(); i++) {
    const std::string& s = tok.specials_[i];
    if (!tok.special_ids_.emplace(std::string_view(s), rt.size() + int(i)).second)
      fail(config_path, "special token \"" + s + "\" is listed twice");
    if (std::find(tok.special_lengths_.begin(), tok.special_lengths_.end(), s.size()) ==
        tok.special_lengths_.end())
      tok.special_lengths_.push_back(s.size());
    tok.special_first_byte_[static_cast<unsigned char>(s[0])] = true;
  }
  std::sort(tok.special_lengths_.rbegin(), tok.special_lengths_.rend());
  return tok;
}

// ---- lookup ----

std::string_view Tokenizer::token_bytes(int id) const {
  if (id >= 0 && id < ranks_.size()) return ranks_.bytes(id);
  if (is_special(id)) return specials_[id - ranks_.size()];
  throw Error("token id " + std::to_string(id) + " is outside the vocabulary (size " +
              std::to_string(vocab_size()) + ")");
}

int Tokenizer::special_id(std::string_view spelling) const {
  auto it = special_ids_.find(spelling);
  return it == special_ids_.end() ? -1 : it->second;
}

int Tokenizer::require_special(std::string_view spelling) const {
  int id = special_id(spelling);
  if (id < 0) throw Error("tokenizer: no special token \"" + std::string(spelling) + "\"");
  return id;
}

// ---- byte-pair merge ----

void Tokenizer::bpe(std::string_view piece, std::vector<int>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_rank_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (int r = ranks_.find(piece.data(), piece.size()); r >= 0) {  // whole piece is a token
    out.push_back(r);
    return;
  }
  if (piece.size() <= kLinearBpeMax)
    bpe_linear(piece, out);
  else
    bpe_heap(piece, out);
}

// tiktoken's scheme: parts in an array, each holding the rank of the merge with its
// right neighbour; repeatedly merge the leftmost minimum. O(n^2), but no
// allocation and fast for the short pieces that dominate real text.
void Tokenizer::bpe_linear(std::string_view piece, std::vector<int>& out) const {
  const size_t n = piece.size();
  if (n > kLinearBpeMax) {
    bpe_heap(piece, out);
    return;
  }
  const char* p = piece.data();
  uint32_t start[kLinearBpeMax + 1], tok[kLinearBpeMax], pair[kLinearBpeMax];
  auto pair_rank = [&](size_t a, size_t b) -> uint32_t {  // bytes [a, b)
    int r = ranks_.find(p + a, b - a);
    return r < 0 ? kNoRank : uint32_t(r);
  };
  for (size_t i = 0; i < n; i++) {
    start[i] = uint32_t(i);
    tok[i] = uint32_t(byte_rank_[static_cast<unsigned char>(p[i])]);
  }
  start[n] = uint32_t(n);
  // The first round of lookups is independent: prefetch them all.
  uint64_t hashes[kLinearBpeMax];
  for (size_t i = 0; i + 1 < n; i++) {
    hashes[i] = RankTable::hash(p + i, 2);
    ranks_.prefetch(hashes[i]);
  }
  for (size_t i = 0; i + 1 < n; i++) {
    int r = ranks_.find_hashed(p + i, 2, hashes[i]);
    pair[i] = r < 0 ? kNoRank : uint32_t(r);
  }
  pair[n - 1] = kNoRank;
  size_t parts = n;
  while (parts > 1) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts; i++)
      if (pair[i] < best) best = pair[i], at = i;
    if (best == kNoRank) break;
    tok[at] = best;
    // Remove part at+1.
    std::memmove(start + at + 1, start + at + 2, (parts - at - 1) * sizeof start[0]);
    std::memmove(tok + at + 1, tok + at + 2, (parts - at - 2) * sizeof tok[0]);
    std::memmove(pair + at + 1, pair + at + 2, (parts - at - 2) * sizeof pair[0]);
    parts--;
    pair[at] = at + 1 < parts ? pair_rank(start[at], start[at + 2]) : kNoRank;
    if (at > 0) pair[at - 1] = pair_rank(start[at - 1], start[at + 1]);
  }
  for (size_t i = 0; i < parts; i++) out.push_back(int(tok[i]));
}

// O(n log n): parts form a linked list indexed by start byte; a min-heap of
// (merge rank, start) gives the lowest rank, leftmost on ties. Entries go stale
// when a neighbour merges; a popped entry is live iff its part still exists and
// still has that merge rank (a rank names one byte string, so the same rank at
// the same start is the same merge).
void Tokenizer::bpe_heap(std::string_view piece, std::vector<int>& out) const {
  const size_t n = piece.size();
  const char* p = piece.data();
  constexpr uint32_t kEnd = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> next(n), prev(n), tok(n), pair(n);
  std::vector<uint64_t> heap;
  heap.reserve(n);
  auto end_of = [&](uint32_t i) -> size_t { return next[i] == kEnd ? n : next[i]; };
  auto pair_rank = [&](uint32_t i) -> uint32_t {
    if (next[i] == kEnd) return kNoRank;
    int r = ranks_.find(p + i, end_of(next[i]) - i);
    return r < 0 ? kNoRank : uint32_t(r);
  };
  auto push = [&](uint32_t i) {
    if (pair[i] == kNoRank) return;
    heap.push_back((uint64_t(pair[i]) << 32) | i);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (uint32_t i = 0; i < n; i++) {
    next[i] = i + 1 < n ? i + 1 : kEnd;
    prev[i] = i > 0 ? i - 1 : kEnd;
    tok[i] = uint32_t(byte_rank_[static_cast<unsigned char>(p[i])]);
  }
  for (uint32_t i = 0; i < n; i++) pair[i] = pair_rank(i);
  for (uint32_t i = 0; i < n; i++)
    if (pair[i] != kNoRank) heap.push_back((uint64_t(pair[i]) << 32) | i);
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    uint64_t top = heap.back();
    heap.pop_back();
    uint32_t i = uint32_t(top), rank = uint32_t(top >> 32);
    if (!alive[i] || pair[i] != rank) continue;
    uint32_t j = next[i];
    tok[i] = rank;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] != kEnd) prev[next[j]] = i;
    pair[i] = pair_rank(i);
    push(i);
    if (prev[i] != kEnd) {
      pair[prev[i]] = pair_rank(prev[i]);
      push(prev[i]);
    }
  }
  for (uint32_t i = 0; i != kEnd; i = next[i]) out.push_back(int(tok[i]));
}

// ---- encoding ----

std::vector<int> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int> out;
  out.reserve(text.size() / 4 + 4);
  encode_into(text, allow_special, out);
  return out;
}

void Tokenizer::encode_into(std::string_view text, bool allow_special, std::vector<int>& out) const {
  encode_into(text, allow_special, out, SIZE_MAX);
}

bool Tokenizer::encode_into(std::string_view text, bool allow_special, std::vector<int>& out,
                            size_t max_tokens) const {
  PieceMatcher matcher(pre_);
  if (!safety_splits_) {
    encode_slice(text, allow_special, matcher, out, max_tokens);
  } else {
    safety_split(text, [&](std::string_view slice) {
      if (out.size() <= max_tokens) encode_slice(slice, allow_special, matcher, out, max_tokens);
    });
  }
  return out.size() <= max_tokens;
}

bool Tokenizer::find_special(std::string_view text, size_t from, size_t* at, size_t* len,
                             int* id) const {
  for (size_t i = from; i < text.size(); i++) {
    if (!special_first_byte_[static_cast<unsigned char>(text[i])]) continue;
    for (size_t l : special_lengths_) {
      if (l > text.size() - i) continue;
      auto it = special_ids_.find(text.substr(i, l));
      if (it != special_ids_.end()) {
        *at = i, *len = l, *id = it->second;
        return true;
      }
    }
  }
  return false;
}

void Tokenizer::encode_slice(std::string_view text, bool allow_special, PieceMatcher& m, std::vector<int>& out,
                             size_t max_tokens) const {
  if (!allow_special || specials_.empty()) {
    encode_ordinary(text, m, out, max_tokens);
    return;
  }
  size_t pos = 0, at, len;
  int id;
  while (out.size() <= max_tokens && find_special(text, pos, &at, &len, &id)) {
    encode_ordinary(text.substr(pos, at - pos), m, out, max_tokens);
    out.push_back(id);
    pos = at + len;
  }
  if (out.size() <= max_tokens) encode_ordinary(text.substr(pos), m, out, max_tokens);
}

void Tokenizer::encode_ordinary(std::string_view text, PieceMatcher& m, std::vector<int>& out,
                                size_t max_tokens) const {
  auto* u = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size() && out.size() <= max_tokens) {
    size_t valid = utf8_valid_prefix(text.substr(i));
    if (valid) {
      std::string_view run = text.substr(i, valid);
      m.reset(run);
      size_t b, e;
      while (out.size() <= max_tokens && m.next(&b, &e)) bpe(run.substr(b, e - b), out);
      i += valid;
    }
    if (i < text.size() && out.size() <= max_tokens) {  // ill-formed bytes: one single-byte token each
      Utf8Step st = utf8_step(u + i, text.size() - i);
      for (uint32_t k = 0; k < st.len; k++) out.push_back(byte_rank_[u[i + k]]);
      i += st.len;
    }
  }
}

// ---- decoding ----

std::string Tokenizer::decode_bytes(std::span<const int> ids, bool show_special) const {
  std::string out;
  for (int id : ids) {
    if (is_special(id) && !show_special) continue;
    out += token_bytes(id);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int> ids, bool show_special) const {
  return utf8_lossy(decode_bytes(ids, show_special));
}

}  // namespace sluice::text
