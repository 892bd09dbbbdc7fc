#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

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

GenerateResult generate(Session& s, std::span<const int> prompt, const GenerateOptions& opt, PrefixCache* cache,
                        const std::function<Verdict(const TokenEvent&)>& on_token) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) fail("generate", "empty prompt");
  Sampler sampler(opt.sampling);
  GenerateResult r;
  r.prompt_tokens = int(prompt.size());
  auto cancelled = [&] { return opt.cancelled && opt.cancelled(); };
  if (cancelled()) {
    r.finish = Finish::cancelled;
    return r;
  }
  if (opt.max_new_tokens <= 0) {
    r.finish = Finish::length;
    return r;
  }

  const auto t0 = clock::now();
  std::vector<float> saved_logits;
  size_t reused = 0;
  if (cache)
    reused = cache->resume(s, prompt, &saved_logits);
  else
    s.reset();
  r.cached_tokens = int(reused);
  const std::vector<float>* logits = &saved_logits;
  if (reused < prompt.size()) {
    const bool fed = s.prefill_chunked(prompt.subspan(reused), opt.prefill_chunk_tokens, [&](size_t done, size_t total) {
      if (opt.prefill_progress) opt.prefill_progress(done, total);
      return done == 0 || done == total || !cancelled();  // polled between chunks (and before the prefill, above)
    });
    if (!fed) {
      r.finish = Finish::cancelled;
      r.prefill_seconds = seconds_since(t0);
      return r;
    }
    logits = &s.logits();
    if (cache) cache->save(s, *logits);
  }
  r.prefill_seconds = seconds_since(t0);

  std::vector<float> lp;
  TokenEvent ev;
  double decode = 0;
  const size_t V = size_t(s.model().config().vocab_size);
  const bool drafting = opt.draft.max_tokens > 0;
  Drafter drafter(opt.draft, opt.draft_store);
  if (drafting) drafter.append(prompt);
  // Reports token `id` sampled from logits row `row`; false when the generation ends there.
  auto emit = [&](int id, const float* row) {
    ev.id = id;
    ev.is_stop_id = std::find(opt.stop_ids.begin(), opt.stop_ids.end(), ev.id) != opt.stop_ids.end();
    if (opt.logprobs >= 0) {
      log_softmax(std::span<const float>(row, V), lp);
      ev.logprob = lp[size_t(ev.id)];
      ev.top = top_logprobs(lp, opt.logprobs);
    }
    if (++r.generated_tokens == 1) r.first_token_seconds = seconds_since(t0);
    if (drafting) drafter.append(id);
    Verdict v = on_token(ev);
    if (ev.is_stop_id || v == Verdict::stop) {
      r.finish = Finish::stop;
      return false;
    }
    if (v == Verdict::cancel || cancelled()) {
      r.finish = Finish::cancelled;
      return false;
    }
    if (r.generated_tokens >= opt.max_new_tokens) {
      r.finish = Finish::length;
      return false;
    }
    return true;
  };

  const float* cur = logits->data();  // the row the pending token was sampled from
  int next = sampler.sample(std::span<const float>(cur, V));
  r.passes = 1;
  const uint64_t bytes0 = model_bytes_read(s.model());
  while (emit(next, cur)) {
    // `next` is reported and must be fed; drafts ride along in the same pass.
    const std::vector<int> drafts = drafting ? drafter.draft(opt.max_new_tokens - r.generated_tokens - 1) : std::vector<int>{};
    const auto ts = clock::now();
    r.passes++;
    r.rows += 1 + int(drafts.size());
    if (drafts.empty()) {
      cur = s.step(next).data();
      decode += seconds_since(ts);
      next = sampler.sample(std::span<const float>(cur, V));
      continue;
    }
    std::vector<int> chunk{next};
    chunk.insert(chunk.end(), drafts.begin(), drafts.end());
    const float* rows = s.verify(chunk).data();
    decode += seconds_since(ts);
    r.draft_proposed += int(drafts.size());
    // Row i holds the logits after chunk[i]; draft i is chunk[i + 1].
    size_t keep = chunk.size();
    bool going = true;
    for (size_t i = 0; i < drafts.size(); i++) {
      cur = rows + i * V;
      bool accepted = false;
      next = sampler.sample_draft(std::span<const float>(cur, V), drafts[i], &accepted);
      if (!accepted) {
        keep = i + 1;  // chunk[0..i] stand; `next` replaces draft i
        break;
      }
      r.draft_accepted++;
      if (!emit(next, cur)) {
        keep = i + 1;  // the last reported token is not fed
        going = false;
        break;
      }
    }
    if (keep == chunk.size() && going) {
      cur = rows + drafts.size() * V;  // every draft stood: the model's own next token
      next = sampler.sample(std::span<const float>(cur, V));
    }
    if (keep < chunk.size()) {
      const auto tr = clock::now();
      s.keep_verified(int(keep));
      decode += seconds_since(tr);
    }
    if (!going) break;
  }
  r.decode_seconds = decode;
  r.decode_bytes_read = model_bytes_read(s.model()) - bytes0;
  if (opt.draft_store && drafting) opt.draft_store->add(drafter.context());  // prompt and output
  if (cache && s.tokens().size() > prompt.size()) cache->save(s, std::span<const float>(cur, V));
  return r;
}

uint64_t model_bytes_read(const Model& m) {
  uint64_t b = m.globals_bytes_read;
  if (m.spine) b += m.spine->bytes_read();
  if (m.experts) b += m.experts->stats().bytes_read;
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
