#include "engine/drafter.h"

#include <algorithm>

namespace sluice {

int common_suffix(std::span<const int> a, size_t a_end, std::span<const int> b, int cap) {
  int m = 0;
  while (m < cap && size_t(m) < a_end && size_t(m) < b.size() && a[a_end - 1 - size_t(m)] == b[b.size() - 1 - size_t(m)])
    m++;
  return m;
}

void Drafter::append(int token) {
  at_[token].push_back(int(ctx_.size()));
  ctx_.push_back(token);
}

std::vector<int> Drafter::draft(int n) const {
  std::vector<int> out;
  if (n <= 0 || o_.max_tokens <= 0 || ctx_.empty()) return out;
  n = std::min(n, o_.max_tokens);
  const size_t end = ctx_.size();
  int best = 0;
  size_t best_j = 0;
  auto it = at_.find(ctx_.back());
  if (it != at_.end()) {
    const std::vector<int>& pos = it->second;  // the last one is the context's own last token
    int seen = 0;
    for (size_t i = pos.size() - 1; i-- > 0 && seen < o_.max_candidates; seen++) {
      const size_t j = size_t(pos[i]);  // an earlier occurrence, ending at j
      const int m = common_suffix(ctx_, j + 1, ctx_, o_.max_match);
      if (m > best) {
        best = m;
        best_j = j;
        if (m >= o_.max_match) break;
      }
    }
  }
  // A longer match in the store (an earlier request's prompt and output) wins.
  if (store_ && store_->draft(ctx_, o_, n, out) > best) return out;
  out.clear();
  if (best >= o_.min_match)
    for (size_t k = best_j + 1; k < end && int(out.size()) < n; k++) out.push_back(ctx_[k]);
  return out;
}

void DraftStore::add(std::span<const int> tokens) {
  if (tokens.empty() || max_tokens_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = std::min(tokens.size(), max_tokens_);
  seqs_.emplace_back(tokens.end() - ptrdiff_t(n), tokens.end());
  held_ += n;
  while (held_ > max_tokens_) {
    held_ -= seqs_.front().size();
    seqs_.pop_front();
  }
}

size_t DraftStore::tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

int DraftStore::draft(std::span<const int> context, const DraftOptions& o, int n, std::vector<int>& out) const {
  if (context.empty() || n <= 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const int last = context.back();
  int best = 0;
  const std::vector<int>* best_seq = nullptr;
  size_t best_j = 0;
  // Newest first, so that among equally long matches the most recent wins.
  for (auto s = seqs_.rbegin(); s != seqs_.rend(); ++s) {
    const std::vector<int>& seq = *s;
    for (size_t j = seq.size(); j-- > 0;) {
      if (seq[j] != last || j + 1 >= seq.size()) continue;  // a match needs a continuation
      const int m = common_suffix(seq, j + 1, context, o.max_match);
      if (m > best) {
        best = m;
        best_seq = &seq;
        best_j = j;
      }
    }
  }
  if (best < o.min_match) return 0;
  for (size_t k = best_j + 1; k < best_seq->size() && int(out.size()) < n; k++) out.push_back((*best_seq)[k]);
  return best;
}

}  // namespace sluice
