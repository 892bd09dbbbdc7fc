#include "engine/batch.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace sluice {

namespace {

size_t live_prefix(const std::vector<int>& live, std::span<const int> prompt) {
  if (live.size() > prompt.size() || !std::equal(live.begin(), live.end(), prompt.begin())) return 0;
  return live.size();
}

}  // namespace

Batch::Batch(Model& m, int slots, PrefixCache* cache) : cache_(cache) {
  if (slots < 1) fail("batch", "needs at least one slot");
  slots_.resize(size_t(slots));
  for (Slot& s : slots_) s.session = std::make_unique<Session>(m);
}

int Batch::active() const {
  return int(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.gen != nullptr; }));
}

int Batch::prefilling() const {
  return int(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.gen && s.gen->prefilling(); }));
}

void Batch::add(std::span<const int> prompt, const GenerateOptions& opt, OnToken on_token, OnDone on_done) {
  Slot* best = nullptr;
  size_t best_len = 0;
  for (Slot& s : slots_) {
    if (s.gen) continue;
    const size_t n = live_prefix(s.session->tokens(), prompt);
    if (!best || n > best_len) best = &s, best_len = n;
  }
  if (!best) fail("batch", "no free slot");
  best->gen = std::make_unique<Generation>(*best->session, prompt, opt, cache_, std::move(on_token));
  best->on_done = std::move(on_done);
  best->order = ++added_;
}

void Batch::retire(Slot& s, std::exception_ptr error) {
  if (error) s.session->reset();  // a failed pass may have left the state half-advanced
  const GenerateResult r = s.gen->result();
  s.gen.reset();
  OnDone done = std::move(s.on_done);
  s.on_done = nullptr;
  if (done) done(r, error);
}

void Batch::step() {
  for (Slot& s : slots_)
    if (s.gen && s.gen->poll_cancelled()) retire(s);

  // Prefill: a chunk of every joining generation, oldest first, in one pass
  // (their spine and expert reads shared), at most the oldest one's chunk size
  // of rows in all, so a long prompt holds the decoding ones up by one chunk.
  std::vector<Slot*> joining;
  for (Slot& s : slots_)
    if (s.gen && s.gen->prefilling()) joining.push_back(&s);
  std::sort(joining.begin(), joining.end(), [](const Slot* a, const Slot* b) { return a->order < b->order; });
  std::vector<Slot*> pre;
  std::vector<Session*> pre_sessions;
  std::vector<std::vector<int>> pre_chunks;
  size_t budget = joining.empty() ? 0 : size_t(std::max(joining[0]->gen->prefill_chunk_tokens(), 1));
  for (Slot* s : joining) {
    if (budget == 0) break;
    std::span<const int> rows;
    try {
      rows = s->gen->prefill_rows(std::min<size_t>(budget, size_t(std::max(s->gen->prefill_chunk_tokens(), 1))));
    } catch (...) {
      retire(*s, std::current_exception());
      continue;
    }
    if (rows.empty()) {  // ended, or resumed its whole prompt from the cache
      if (s->gen->done()) retire(*s);
      continue;
    }
    budget -= rows.size();
    pre.push_back(s);
    pre_sessions.push_back(s->session.get());
    pre_chunks.emplace_back(rows.begin(), rows.end());
  }
  if (!pre.empty()) {
    try {
      Session::feed_together(pre_sessions, pre_chunks, Logits::Last, prefill_logits_);
    } catch (...) {
      const std::exception_ptr e = std::current_exception();
      for (Slot* s : pre) retire(*s, e);
      pre.clear();
    }
    const size_t V = size_t(pre.empty() ? 0 : pre_sessions[0]->model().config().vocab_size);
    for (size_t i = 0; i < pre.size(); i++) {
      std::exception_ptr error;
      try {
        pre[i]->gen->prefill_fed(prefill_logits_.data() + i * V);
      } catch (...) {
        error = std::current_exception();
      }
      if (error || pre[i]->gen->done()) retire(*pre[i], error);
    }
  }

  std::vector<Slot*> in;
  std::vector<Session*> sessions;
  std::vector<std::vector<int>> chunks;
  for (Slot& s : slots_)
    if (s.gen && !s.gen->prefilling() && !s.gen->done()) {
      in.push_back(&s);
      sessions.push_back(s.session.get());
      chunks.push_back(s.gen->rows());
    }
  if (in.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Session::feed_together(sessions, chunks, Logits::All, logits_);
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    for (Slot* s : in) retire(*s, e);
    return;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t V = size_t(sessions[0]->model().config().vocab_size);
  stats_.passes++;
  stats_.last_sequences = int(in.size());
  stats_.last_rows = 0;
  size_t at = 0;
  for (size_t i = 0; i < in.size(); i++) {
    Generation& g = *in[i]->gen;
    const GenerateResult before = g.result();
    std::exception_ptr error;
    try {
      g.absorb(logits_.data() + at * V, secs);
    } catch (...) {
      error = std::current_exception();
    }
    at += chunks[i].size();
    stats_.last_rows += int(chunks[i].size());
    const GenerateResult& after = g.result();
    stats_.tokens += uint64_t(after.generated_tokens - before.generated_tokens);
    stats_.draft_proposed += uint64_t(after.draft_proposed - before.draft_proposed);
    stats_.draft_accepted += uint64_t(after.draft_accepted - before.draft_accepted);
    if (error || g.done()) retire(*in[i], error);
  }
  stats_.rows += uint64_t(stats_.last_rows);
}

}  // namespace sluice
