#include "engine/session.h"

#include <algorithm>

#include "base/error.h"

namespace sluice {

Session::Session(Model& model) : model_(model), state_(model.new_state()) {}

const std::vector<float>& Session::prefill(std::span<const int> tokens) {
  model_.forward(state_, tokens, Logits::Last, &logits_);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return logits_;
}

const std::vector<float>& Session::prefill_all(std::span<const int> tokens) {
  model_.forward(state_, tokens, Logits::All, &logits_);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return logits_;
}

const std::vector<float>& Session::step(int token) {
  const int one[1] = {token};
  return prefill(one);
}

const std::vector<float>& Session::verify(std::span<const int> tokens) {
  model_.forward(state_, tokens, Logits::All, &logits_, nullptr, &undo_);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return logits_;
}

void Session::feed_together(std::span<Session* const> sessions, std::span<const std::vector<int>> chunks,
                            Logits which, std::vector<float>& logits, size_t prompt_chunks) {
  if (sessions.size() != chunks.size()) fail("feed_together", "one chunk per session");
  if (sessions.empty()) fail("feed_together", "no sessions");
  Model& m = sessions[0]->model_;
  std::vector<ModelRows> seqs;
  for (size_t i = 0; i < sessions.size(); i++) {
    Session& s = *sessions[i];
    if (&s.model_ != &m) fail("feed_together", "sessions of different models");
    s.undo_.clear();
    const bool prompt = i < prompt_chunks;
    const bool verifying = which == Logits::All && !prompt && chunks[i].size() > 1;
    seqs.push_back({&s.state_, chunks[i], verifying ? &s.undo_ : nullptr, prompt});
  }
  m.forward_rows(seqs, which, &logits);
  for (size_t i = 0; i < sessions.size(); i++)
    sessions[i]->tokens_.insert(sessions[i]->tokens_.end(), chunks[i].begin(), chunks[i].end());
}

void Session::keep_verified(int keep) {
  const int drop = undo_.rows() - keep;
  model_.rollback(state_, undo_, keep);
  tokens_.resize(tokens_.size() - size_t(drop));
}

bool Session::prefill_chunked(std::span<const int> tokens, int chunk, const PrefillProgress& progress) {
  if (chunk <= 0) fail("prefill", "chunk size must be positive");
  size_t done = 0;
  if (progress && !progress(done, tokens.size())) return false;
  while (done < tokens.size()) {
    const size_t n = std::min(tokens.size() - done, size_t(chunk));
    prefill(tokens.subspan(done, n));
    done += n;
    if (progress && !progress(done, tokens.size())) return done == tokens.size();
  }
  return true;
}

void Session::reset() {
  state_.reset();
  tokens_.clear();
  undo_.clear();
}

void Session::restore(const Snapshot& s) {
  state_ = s.state;
  tokens_ = s.tokens;
  undo_.clear();
}

int argmax(std::span<const float> logits) {
  return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<int> generate_greedy(Session& s, std::span<const int> prompt, int max_new, std::span<const int> stop) {
  std::vector<int> out;
  if (max_new <= 0) return out;
  if (prompt.empty()) fail("generate", "empty prompt");
  int next = argmax(s.prefill(prompt));
  for (;;) {
    out.push_back(next);
    if (int(out.size()) >= max_new || std::find(stop.begin(), stop.end(), next) != stop.end()) break;
    next = argmax(s.step(next));
  }
  return out;
}

}  // namespace sluice
