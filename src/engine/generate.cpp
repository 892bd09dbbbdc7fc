#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "model/dense_reads.h"

namespace sluice {

namespace {

bool is_prefix(std::span<const int> head, std::span<const int> of) {
  return head.size() <= of.size() && std::equal(head.begin(), head.end(), of.begin());
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

size_t PrefixCache::resume(Session& s, std::span<const int> prompt, std::vector<float>* logits) {
  Entry* best = nullptr;
  size_t best_len = 0;
  for (Entry& e : entries_) {
    size_t n = e.snap.tokens.size();
    if (n == 0 || n <= best_len || !is_prefix(e.snap.tokens, prompt)) continue;
    if (n == prompt.size() && e.logits.empty()) continue;  // would have nothing to sample from
    best = &e;
    best_len = n;
  }
  // The live state needs no copy; it is as good as a saved one of the same length
  // unless it would have to cover the whole prompt (its logits are not kept).
  const std::vector<int>& live = s.tokens();
  if (!live.empty() && live.size() < prompt.size() && live.size() >= best_len && is_prefix(live, prompt))
    return live.size();
  if (!best) {
    s.reset();
    return 0;
  }
  s.restore(best->snap);
  best->last_used = ++clock_;
  if (best_len == prompt.size()) *logits = best->logits;
  return best_len;
}

void PrefixCache::save(const Session& s, std::span<const float> last_logits) {
  const std::vector<int>& toks = s.tokens();
  if (toks.empty()) return;
  const uint64_t need = s.state().bytes() + toks.size() * sizeof(int) + last_logits.size() * sizeof(float);
  if (need > budget_ || max_entries_ == 0) return;
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->snap.tokens == toks) {
      bytes_ -= it->bytes;
      entries_.erase(it);
      break;
    }
  Entry e{s.snapshot(), std::vector<float>(last_logits.begin(), last_logits.end()), need, ++clock_};
  entries_.push_front(std::move(e));
  bytes_ += need;
  while (bytes_ > budget_ || entries_.size() > max_entries_) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
    bytes_ -= oldest->bytes;
    entries_.erase(oldest);
  }
}

void PrefixCache::clear() {
  entries_.clear();
  bytes_ = 0;
}

Generation::Generation(Session& s, std::span<const int> prompt, const GenerateOptions& opt, PrefixCache* cache,
                       OnToken on_token)
    : s_(s),
      prompt_(prompt.begin(), prompt.end()),
      opt_(opt),
      cache_(cache),
      on_token_(std::move(on_token)),
      sampler_(opt.sampling),
      drafter_(opt.draft, opt.draft_store),
      drafting_(opt.draft.max_tokens > 0),
      draft_window_(opt.draft.max_tokens),
      V_(size_t(s.model().config().vocab_size)) {
  if (prompt_.empty()) fail("generate", "empty prompt");
  r_.prompt_tokens = int(prompt_.size());
}

bool Generation::poll_cancelled() {
  if (done() || !cancelled()) return false;
  r_.finish = Finish::cancelled;
  if (phase_ == Phase::decode) {
    finish_decode();
  } else {
    if (started_) r_.prefill_seconds = seconds_since(t0_);
    phase_ = Phase::done;
  }
  return true;
}

void Generation::prefill_chunk() {
  const std::span<const int> rows = prefill_rows(size_t(std::max(opt_.prefill_chunk_tokens, 0)));
  if (rows.empty()) return;
  s_.prefill(rows);
  prefill_fed(s_.logits().data());
}

std::span<const int> Generation::prefill_rows(size_t max_tokens) {
  if (!prefilling()) return {};
  const std::span<const int> prompt(prompt_);
  if (!started_) {
    started_ = true;
    if (cancelled()) {
      r_.finish = Finish::cancelled;
      phase_ = Phase::done;
      return {};
    }
    if (opt_.max_new_tokens <= 0) {
      r_.finish = Finish::length;
      phase_ = Phase::done;
      return {};
    }
    t0_ = std::chrono::steady_clock::now();
    if (cache_)
      reused_ = cache_->resume(s_, prompt, &saved_logits_);
    else
      s_.reset();
    r_.cached_tokens = int(reused_);
    fed_ = reused_;
    if (reused_ == prompt.size()) {
      start_decode(saved_logits_.data());
      return {};
    }
    if (opt_.prefill_chunk_tokens <= 0) fail("prefill", "chunk size must be positive");
    if (opt_.prefill_progress) opt_.prefill_progress(0, prompt.size() - reused_);
  }
  feeding_ = std::min(prompt.size() - fed_, std::max<size_t>(max_tokens, 1));
  return prompt.subspan(fed_, feeding_);
}

void Generation::prefill_fed(const float* last_logits) {
  if (!prefilling() || feeding_ == 0) fail("generate", "prefill_fed() without prefill_rows()");
  fed_ += feeding_;
  feeding_ = 0;
  const size_t done = fed_ - reused_, total = prompt_.size() - reused_;
  if (opt_.prefill_progress) opt_.prefill_progress(done, total);
  if (done < total) {
    if (cancelled()) {  // polled between chunks
      r_.finish = Finish::cancelled;
      r_.prefill_seconds = seconds_since(t0_);
      phase_ = Phase::done;
    }
    return;
  }
  if (cache_) cache_->save(s_, std::span<const float>(last_logits, V_));
  start_decode(last_logits);
}

void Generation::start_decode(const float* logits) {
  r_.prefill_seconds = seconds_since(t0_);
  if (drafting_) drafter_.append(std::span<const int>(prompt_));
  phase_ = Phase::decode;
  cur_ = logits;
  next_ = sampler_.sample(std::span<const float>(cur_, V_));
  r_.passes = 1;
  bytes0_ = model_bytes_read(s_.model());
  if (!emit(next_, cur_)) finish_decode();
}

bool Generation::emit(int id, const float* row) {
  ev_.id = id;
  ev_.is_stop_id = std::find(opt_.stop_ids.begin(), opt_.stop_ids.end(), id) != opt_.stop_ids.end();
  if (opt_.logprobs >= 0) {
    log_softmax(std::span<const float>(row, V_), lp_);
    ev_.logprob = lp_[size_t(id)];
    ev_.top = top_logprobs(lp_, opt_.logprobs);
  }
  if (++r_.generated_tokens == 1) r_.first_token_seconds = seconds_since(t0_);
  if (drafting_) drafter_.append(id);
  Verdict v = on_token_(ev_);
  if (ev_.is_stop_id || v == Verdict::stop) {
    r_.finish = Finish::stop;
    return false;
  }
  if (v == Verdict::cancel || cancelled()) {
    r_.finish = Finish::cancelled;
    return false;
  }
  if (r_.generated_tokens >= opt_.max_new_tokens) {
    r_.finish = Finish::length;
    return false;
  }
  return true;
}

const std::vector<int>& Generation::rows() {
  // `next_` is reported and must be fed; drafts ride along in the same pass.
  chunk_.assign(1, next_);
  if (drafting_) {
    const std::vector<int> drafts =
        drafter_.draft(std::min(draft_window_, opt_.max_new_tokens - r_.generated_tokens - 1));
    chunk_.insert(chunk_.end(), drafts.begin(), drafts.end());
  }
  return chunk_;
}

void Generation::absorb(const float* logits, double seconds) {
  if (phase_ != Phase::decode) fail("generate", "absorb() outside decoding");
  decode_ += seconds;
  r_.passes++;
  r_.rows += int(chunk_.size());
  const size_t drafts = chunk_.size() - 1;
  if (drafts == 0) {
    cur_ = logits;
    next_ = sampler_.sample(std::span<const float>(cur_, V_));
  } else {
    r_.draft_proposed += int(drafts);
    // Row i holds the logits after chunk[i]; draft i is chunk[i + 1].
    size_t keep = chunk_.size();
    bool going = true;
    for (size_t i = 0; i < drafts; i++) {
      cur_ = logits + i * V_;
      bool accepted = false;
      next_ = sampler_.sample_draft(std::span<const float>(cur_, V_), chunk_[i + 1], &accepted);
      if (!accepted) {
        keep = i + 1;  // chunk[0..i] stand; `next_` replaces draft i
        break;
      }
      r_.draft_accepted++;
      if (!emit(next_, cur_)) {
        keep = i + 1;  // the last reported token is not fed
        going = false;
        break;
      }
    }
    if (keep == chunk_.size() && going) {
      cur_ = logits + drafts * V_;  // every draft stood: the model's own next token
      next_ = sampler_.sample(std::span<const float>(cur_, V_));
      draft_window_ = std::min(opt_.draft.max_tokens, 2 * draft_window_);
    } else if (going) {
      // keep - 1 drafts stood: halve the window, but try at least one more than
      // that. (Cutting it to `keep` at once lost drafts on repetitive text,
      // where a miss is one branching point and the next match is good again:
      // docs/decisions.md, "Drafts and several sequences".)
      draft_window_ = std::max(int(keep), draft_window_ / 2);
    }
    if (opt_.draft.fixed_window) draft_window_ = opt_.draft.max_tokens;
    if (keep < chunk_.size()) {
      const auto tr = std::chrono::steady_clock::now();
      s_.keep_verified(int(keep));
      decode_ += seconds_since(tr);
    }
    if (!going) return finish_decode();
  }
  if (!emit(next_, cur_)) finish_decode();
}

void Generation::finish_decode() {
  phase_ = Phase::done;
  r_.decode_seconds = decode_;
  r_.decode_bytes_read = model_bytes_read(s_.model()) - bytes0_;
  if (opt_.draft_store && drafting_) opt_.draft_store->add(drafter_.context());  // prompt and output
  if (cache_ && s_.tokens().size() > prompt_.size()) cache_->save(s_, std::span<const float>(cur_, V_));
}

GenerateResult generate(Session& s, std::span<const int> prompt, const GenerateOptions& opt, PrefixCache* cache,
                        const std::function<Verdict(const TokenEvent&)>& on_token) {
  Generation g(s, prompt, opt, cache, on_token);
  while (g.prefilling()) g.prefill_chunk();
  while (!g.done()) {
    const std::vector<int>& rows = g.rows();
    const auto ts = std::chrono::steady_clock::now();
    const float* logits = rows.size() == 1 ? s.step(rows[0]).data() : s.verify(rows).data();
    g.absorb(logits, seconds_since(ts));
  }
  return g.result();
}

uint64_t model_bytes_read(const Model& m) {
  const ModelIo io = m.io();
  uint64_t b = io.globals_bytes_read;
  if (io.spine) b += io.spine->bytes_read();
  if (io.experts) b += io.experts->stats().bytes_read;
  return b;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
  if (matched_) return {};
  held_.append(text);
  // The earliest occurrence of any stop sequence ends the text there.
  size_t at = std::string::npos;
  for (const std::string& s : stops_) at = std::min(at, held_.find(s));
  if (at != std::string::npos) {
    std::string out = held_.substr(0, at);
    held_.clear();
    matched_ = true;
    return out;
  }
  // Hold the longest tail that is a proper prefix of some stop sequence.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; k--)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!matched_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace sluice
