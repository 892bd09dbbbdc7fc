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

void plan_batch_passes(ModelOptions& mo, int sequences, int draft_max, int prefill_chunk) {
  const int rows = std::max(sequences, 1) * (1 + std::max(draft_max, 0));
  mo.chunk_tokens = std::max(std::max(prefill_chunk, 1), rows + 1);
  mo.logit_rows = rows;
}

void Batch::step() {
  for (Slot& s : slots_)
    if (s.gen && s.gen->poll_cancelled()) retire(s);

  // The decoding generations' rows: each one's pending token and its drafts.
  std::vector<Slot*> in;
  std::vector<std::vector<int>> rows;
  size_t decode_rows = 0;
  auto decode = [&](Slot& s) {
    in.push_back(&s);
    rows.push_back(s.gen->rows());
    decode_rows += rows.back().size();
  };
  for (Slot& s : slots_)
    if (s.gen && !s.gen->prefilling() && !s.gen->done()) decode(s);

  // A chunk of every joining generation, oldest first, rides in the same pass
  // (the spine and expert reads shared with the decode rows): at most the
  // oldest one's chunk size of rows in all, decode rows included, so a long
  // prompt holds the decoding ones up by one chunk's compute.
  std::vector<Slot*> joining;
  for (Slot& s : slots_)
    if (s.gen && s.gen->prefilling()) joining.push_back(&s);
  std::sort(joining.begin(), joining.end(), [](const Slot* a, const Slot* b) { return a->order < b->order; });
  std::vector<Slot*> pre;
  std::vector<std::vector<int>> pre_rows;
  const size_t chunk = joining.empty() ? 0 : size_t(std::max(joining[0]->gen->prefill_chunk_tokens(), 1));
  size_t budget = chunk > decode_rows ? chunk - decode_rows : 1;  // a prompt always moves
  for (Slot* s : joining) {
    if (budget == 0) break;
    std::span<const int> r;
    try {
      r = s->gen->prefill_rows(std::min<size_t>(budget, size_t(std::max(s->gen->prefill_chunk_tokens(), 1))));
    } catch (...) {
      retire(*s, std::current_exception());
      continue;
    }
    if (r.empty()) {  // ended, or resumed its whole prompt from the cache: then it decodes now
      if (s->gen->done()) retire(*s);
      else if (!s->gen->prefilling()) decode(*s);
      continue;
    }
    budget -= r.size();
    pre.push_back(s);
    pre_rows.emplace_back(r.begin(), r.end());
  }
  if (in.empty() && pre.empty()) return;

  // ONE pass: the prompt chunks first (their last rows' logits), then the decode rows (every row's).
  std::vector<Session*> sessions;
  std::vector<std::vector<int>> chunks = std::move(pre_rows);
  for (Slot* s : pre) sessions.push_back(s->session.get());
  for (Slot* s : in) sessions.push_back(s->session.get());
  chunks.insert(chunks.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Session::feed_together(sessions, chunks, Logits::All, logits_, pre.size());
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    for (Slot* s : pre) retire(*s, e);
    for (Slot* s : in) retire(*s, e);
    return;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t V = size_t(sessions[0]->model().config().vocab_size);
  for (size_t i = 0; i < pre.size(); i++) {
    std::exception_ptr error;
    try {
      pre[i]->gen->prefill_fed(logits_.data() + i * V);
    } catch (...) {
      error = std::current_exception();
    }
    if (error || pre[i]->gen->done()) retire(*pre[i], error);
  }
  if (in.empty()) {
    stats_.prompt_passes++;
    return;
  }
  stats_.passes++;
  if (!pre.empty()) stats_.fused_passes++;
  for (size_t i = 0; i < pre.size(); i++) stats_.prompt_rows += chunks[i].size();
  stats_.last_sequences = int(in.size());
  stats_.last_rows = 0;
  size_t at = pre.size();
  for (size_t i = 0; i < in.size(); i++) {
    Generation& g = *in[i]->gen;
    const GenerateResult before = g.result();
    std::exception_ptr error;
    try {
      g.absorb(logits_.data() + at * V, secs);
    } catch (...) {
      error = std::current_exception();
    }
    const size_t n = chunks[pre.size() + i].size();
    at += n;
    stats_.last_rows += int(n);
    const GenerateResult& after = g.result();
    stats_.tokens += uint64_t(after.generated_tokens - before.generated_tokens);
    stats_.draft_proposed += uint64_t(after.draft_proposed - before.draft_proposed);
    stats_.draft_accepted += uint64_t(after.draft_accepted - before.draft_accepted);
    if (error || g.done()) retire(*in[i], error);
  }
  stats_.rows += uint64_t(stats_.last_rows);
}

}  // namespace sluice
