// text/tokenizer.h — Kimi K3's tiktoken-style byte-level BPE tokenizer.
//
// text/ turns user text into token ids and ids back into text:
//   tokenizer.h    vocabulary files, encode (pre-tokenize + rank BPE), decode
//   pretokenizer.h the split pattern (PCRE2, translated from tiktoken's syntax)
//   detokenizer.h  streaming, UTF-8-safe decoding of generated ids
//   chat.h         K3's XTML chat markup, stop ids, reasoning/content split
//
// Vocabulary: `tiktoken.model` gives the ordinary tokens (base64 bytes + rank per
// line, ranks 0..n-1 in file order, all 256 single bytes present);
// `tokenizer_config.json` names the special tokens n..n+R-1 (R =
// num_reserved_special_tokens, 256 for K3), unlisted ones being
// `<|reserved_token_<id>|>`.
//
// Encoding (spec §6.2): safety splits (400,000-char slices, same-class runs of
// at most 25,000 chars; K3 only), special tokens only when allow_special, pre-tokenizer
// pattern, then per piece the lowest-rank-first byte-pair merge. Bytes that are
// not valid UTF-8 never reach the pattern: each becomes its own single-byte
// token, so encode/decode_bytes round-trips any byte string.
//
// A Tokenizer is immutable after loading; encode/decode are safe from many threads.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/pretokenizer.h"

namespace sluice::text {

// Byte string -> rank, open addressing over one arena of token bytes. A slot
// holds a token's first 8 bytes and its length, so tokens of up to 8 bytes (most
// BPE lookups) are resolved with one memory access.
struct RankTable {
  std::string arena;              // all token bytes back to back
  std::vector<uint32_t> offsets;  // token r is arena[offsets[r], offsets[r+1])
  struct Slot {
    uint64_t head;  // first min(len, 8) bytes, zero-padded
    uint32_t rank;
    uint16_t len;   // 0: empty slot (no token is empty); saturates at 65535
    uint16_t tag;   // hash bits, checked before the arena for longer tokens
  };
  std::vector<Slot> slots;
  uint64_t mask = 0;

  int size() const { return offsets.empty() ? 0 : int(offsets.size() - 1); }
  std::string_view bytes(int rank) const {
    return std::string_view(arena).substr(offsets[rank], offsets[rank + 1] - offsets[rank]);
  }
  int find(const char* p, size_t n) const;  // -1 if absent
  // find() split in two so a caller can issue many independent lookups and let
  // their cache misses overlap: hash + prefetch first, then find_hashed().
  static uint64_t hash(const char* p, size_t n);
  void prefetch(uint64_t h) const { __builtin_prefetch(&slots[h & mask]); }
  int find_hashed(const char* p, size_t n, uint64_t h) const;
  // Builds the hash index over arena/offsets; returns the first duplicated rank or -1.
  int build_index();
};

struct Tokenizer {
  // <dir>/tiktoken.model + <dir>/tokenizer_config.json, K3's split pattern and
  // safety splits.
  static Tokenizer load(const std::string& model_dir);
  // Any tiktoken vocabulary. config_path may be empty: no special tokens.
  // safety_splits: K3's 400,000/25,000-char cuts (tokenization_kimi.py); plain
  // tiktoken (cl100k, o200k) has none.
  static Tokenizer from_files(const std::string& tiktoken_path, const std::string& config_path,
                              std::string_view pattern, bool safety_splits);

  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;

  // allow_special: spellings of special tokens in text become their ids. Leave it
  // off for user/tool text (spec §6.2 step 4).
  std::vector<int> encode(std::string_view text, bool allow_special = false) const;
  void encode_into(std::string_view text, bool allow_special, std::vector<int>& out) const;
  // Stops early once `out` holds more than `max_tokens` ids (a prompt past a cap is
  // refused without its millions of tokens being made); returns false if it stopped.
  bool encode_into(std::string_view text, bool allow_special, std::vector<int>& out, size_t max_tokens) const;

  // Concatenated token bytes, decoded lossily (ill-formed UTF-8 -> U+FFFD).
  // Specials appear as their spelling, or not at all when show_special is false.
  std::string decode(std::span<const int> ids, bool show_special = true) const;
  // The raw concatenated bytes (may be invalid UTF-8).
  std::string decode_bytes(std::span<const int> ids, bool show_special = true) const;

  int vocab_size() const { return ranks_.size() + int(specials_.size()); }
  int n_ranks() const { return ranks_.size(); }
  bool is_special(int id) const { return id >= ranks_.size() && id < vocab_size(); }
  // Bytes of an ordinary token, or the spelling of a special. Throws if out of range.
  std::string_view token_bytes(int id) const;
  int special_id(std::string_view spelling) const;      // -1 if there is none
  int require_special(std::string_view spelling) const;  // throws naming the spelling
  const std::string& pattern() const { return pre_.pattern(); }
  const Pretokenizer& pretokenizer() const { return pre_; }

  // The byte-pair merge of one piece (exposed for tests): lowest rank first,
  // leftmost on ties. Uses a heap for long pieces, a linear scan for short ones.
  void bpe(std::string_view piece, std::vector<int>& out) const;
  void bpe_heap(std::string_view piece, std::vector<int>& out) const;    // tests
  void bpe_linear(std::string_view piece, std::vector<int>& out) const;  // tests

 private:
  explicit Tokenizer(Pretokenizer pre) : pre_(std::move(pre)) {}
  void encode_slice(std::string_view text, bool allow_special, PieceMatcher& m, std::vector<int>& out,
                    size_t max_tokens) const;
  void encode_ordinary(std::string_view text, PieceMatcher& m, std::vector<int>& out, size_t max_tokens) const;
  // Earliest special spelling at or after `from`; longest at that position.
  bool find_special(std::string_view text, size_t from, size_t* at, size_t* len, int* id) const;

  Pretokenizer pre_;
  bool safety_splits_ = true;
  RankTable ranks_;
  std::array<int, 256> byte_rank_{};
  std::vector<std::string> specials_;  // spelling of id n_ranks()+i
  std::unordered_map<std::string_view, int> special_ids_;
  std::vector<size_t> special_lengths_;  // distinct spelling lengths, longest first
  std::array<bool, 256> special_first_byte_{};
};

}  // namespace sluice::text
