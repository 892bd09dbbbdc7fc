// engine/drafter.h — draft tokens from the text itself (no draft model).
//
// Generated text repeats its prompt and itself (code edits, quotes, JSON, tool
// calls, lists). The draft for a context is the continuation of the longest
// earlier occurrence of the context's suffix ("suffix matching"): if the last
// m tokens also occurred earlier, ending at j, the tokens after j are proposed.
// A match shorter than min_match proposes nothing (a one-token match predicts
// little and every drafted row costs compute). The longest match wins; among
// equally long ones the most recent. A DraftStore of recent requests (the
// server's: prompt and output) is searched the same way; a longer match there wins.
//
// Drafts are only proposals: engine/generate.cpp verifies them against the
// model, so they change speed, never the output distribution.
#pragma once
#include <cstddef>
#include <deque>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

namespace sluice {

struct DraftOptions {
  int max_tokens = 8;   // most draft tokens per pass; 0: drafting off
  int min_match = 2;    // shortest suffix match that proposes anything
  int max_match = 64;   // matches are not extended past this (longer ones are as good)
  int max_candidates = 64;  // earlier occurrences of the last token examined, most recent first
  bool fixed_window = false;  // every pass drafts up to max_tokens (engine/generate.h: the window otherwise adapts)
};

// A bounded store of recent token sequences (outputs of earlier requests),
// oldest dropped first once `max_tokens` are held. Thread-safe.
class DraftStore {
 public:
  explicit DraftStore(size_t max_tokens = 1 << 16) : max_tokens_(max_tokens) {}
  void add(std::span<const int> tokens);
  // The longest match (>= min_match) of a suffix of `context` in the stored
  // sequences; appends up to n continuation tokens to `out`. Returns the match length.
  int draft(std::span<const int> context, const DraftOptions& o, int n, std::vector<int>& out) const;
  size_t tokens() const;

 private:
  mutable std::mutex mu_;
  size_t max_tokens_, held_ = 0;
  std::deque<std::vector<int>> seqs_;
};

class Drafter {
 public:
  explicit Drafter(const DraftOptions& o, const DraftStore* store = nullptr) : o_(o), store_(store) {}
  void append(int token);
  void append(std::span<const int> tokens) {
    for (int t : tokens) append(t);
  }
  // Up to n draft tokens for the current context (none when nothing matches).
  std::vector<int> draft(int n) const;
  const std::vector<int>& context() const { return ctx_; }

 private:
  DraftOptions o_;
  const DraftStore* store_;
  std::vector<int> ctx_;
  std::unordered_map<int, std::vector<int>> at_;  // token -> its positions in ctx_, ascending
};

// Length of the common suffix of a[..a_end) and b (at most `cap`).
int common_suffix(std::span<const int> a, size_t a_end, std::span<const int> b, int cap);

}  // namespace sluice
