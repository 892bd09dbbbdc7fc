// engine/generate.h — one generation: prompt in, sampled tokens out.
//
// generate() owns the loop every client shares (the server, `sluice run`):
// resume from the longest saved prefix state (PrefixCache) and prefill the rest,
// then sample / report / step until a stop id, the caller's verdict (a stop
// sequence matched in the text, a client gone), max_new_tokens or cancellation.
// The caller sees every sampled token through one callback; text, stop
// sequences and channels are its business (StopMatcher helps with the first).
//
// Speculative drafting (on by default; DraftOptions::max_tokens 0 turns it
// off): after each sampled token the drafter (engine/drafter.h) may propose
// continuation tokens; the sampled token and the drafts are fed as one chunk
// (one pass reads the weights once for all of them), each draft is accepted or
// replaced by Sampler::sample_draft from the logits before it, and the
// positions after the first replaced one are rolled back (Session::keep_verified).
// The tokens reported are exactly those reported without drafting, greedy or
// seeded sampling alike (Sampler::sample_draft); only the number of passes changes.
//
// Cancellation is polled before the prefill, between prefill chunks and before
// every decode step, so a cancelled generation ends within one chunk or step. The session is left holding the
// prompt and every token that was fed back (the last sampled token is not), and
// the prefix cache gets a snapshot of the prompt end and of the final state.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/drafter.h"
#include "engine/sampler.h"
#include "engine/session.h"

namespace sluice {

// Saved session states to resume from, bounded by bytes (ModelState::bytes()
// plus tokens and logits), least recently used dropped first. Not thread-safe:
// it lives beside the one Session that uses the model.
class PrefixCache {
 public:
  explicit PrefixCache(uint64_t budget_bytes, size_t max_entries = 8)
      : budget_(budget_bytes), max_entries_(max_entries) {}

  // Makes `s` hold the longest known prefix of `prompt` (its own current state,
  // or a saved one) and returns its length. A prefix as long as the whole prompt
  // is used only when its last logits were saved; they go to `*logits`. Without
  // any usable prefix, s is reset and 0 returned.
  size_t resume(Session& s, std::span<const int> prompt, std::vector<float>* logits);
  // Saves the state of `s` with the logits of its last token.
  void save(const Session& s, std::span<const float> last_logits);
  void clear();

  uint64_t bytes() const { return bytes_; }
  size_t entries() const { return entries_.size(); }
  uint64_t budget() const { return budget_; }

 private:
  struct Entry {
    Session::Snapshot snap;
    std::vector<float> logits;
    uint64_t bytes = 0;
    uint64_t last_used = 0;
  };
  uint64_t budget_, bytes_ = 0, clock_ = 0;
  size_t max_entries_;
  std::list<Entry> entries_;
};

struct GenerateOptions {
  int max_new_tokens = 16;
  SamplingParams sampling;
  std::vector<int> stop_ids;      // sampled, reported, then generation ends
  int logprobs = -1;              // -1: none; k >= 0: the sampled token's logprob and the top k
  std::function<bool()> cancelled;  // polled before the prefill, between its chunks and before each step
  // The prompt is fed in chunks of this many tokens (bitwise the same as one
  // chunk), so cancellation and progress reach a long prefill.
  int prefill_chunk_tokens = 256;
  // Called before the first prefill chunk and after each (tokens computed, to compute); may be empty.
  std::function<void(size_t done, size_t total)> prefill_progress;
  DraftOptions draft;                 // max_tokens 0: no drafting
  DraftStore* draft_store = nullptr;  // earlier requests to draft from; this prompt + output is added
};

struct TokenEvent {
  int id = -1;
  bool is_stop_id = false;  // the last event of the generation
  float logprob = 0;        // log-softmax of the raw logits (when logprobs >= 0)
  std::vector<TokenLogprob> top;
};

enum class Verdict { go, stop, cancel };  // the caller's answer to each token
enum class Finish { stop, length, cancelled };

struct GenerateResult {
  Finish finish = Finish::stop;
  int prompt_tokens = 0;
  int cached_tokens = 0;     // prompt tokens taken from a saved state, not computed
  int generated_tokens = 0;  // sampled tokens, stop id included
  double prefill_seconds = 0, first_token_seconds = 0, decode_seconds = 0;
  // Passes that produced tokens: the prefill's last chunk, then every decode
  // step or verify chunk. Without drafting passes == generated_tokens.
  int passes = 0;
  int rows = 0;  // positions computed by decode passes (1 + drafts each)
  int draft_proposed = 0, draft_accepted = 0;
  uint64_t decode_bytes_read = 0;  // weight bytes read from storage by decode passes (spine, experts, embeddings)
  double tokens_per_pass() const { return passes ? double(generated_tokens) / passes : 0.0; }
  double draft_acceptance() const { return draft_proposed ? double(draft_accepted) / draft_proposed : 0.0; }
};

// Weight bytes a model has read from storage so far: streamed spine, expert spans, embedding rows.
uint64_t model_bytes_read(const Model& m);

using OnToken = std::function<Verdict(const TokenEvent&)>;

// One generation advanced a pass at a time, so that several can share passes
// (engine/batch.h); generate() drives one alone. While prefilling(), call
// prefill_chunk(); then, per pass until done(), feed rows() to the session
// (one chunk: step() for one row, verify() for more; or Session::feed_together)
// and give the pass's logits to absorb(). Whoever drives it, the tokens reported
// and the session's final state are the same.
class Generation {
 public:
  // `prompt` and `opt` are copied; the session and the cache must outlive this.
  Generation(Session& s, std::span<const int> prompt, const GenerateOptions& opt, PrefixCache* cache,
             OnToken on_token);

  bool prefilling() const { return phase_ == Phase::prefill; }
  bool done() const { return phase_ == Phase::done; }
  // The first call resumes from the cache; each call feeds one prompt chunk
  // (prefill_chunk_tokens); after the last one the first token is sampled and reported.
  void prefill_chunk();
  // The same, with the chunk fed by the caller (engine/batch.h feeds several
  // prompts' chunks in one pass): the next chunk, at most max_tokens (empty:
  // nothing to feed, the generation ended or resumed its whole prompt), then
  // prefill_fed() with the logits [V] of its last position once it is fed.
  std::span<const int> prefill_rows(size_t max_tokens);
  void prefill_fed(const float* last_logits);
  int prefill_chunk_tokens() const { return opt_.prefill_chunk_tokens; }
  // Ends the generation (Finish::cancelled) if opt.cancelled says so; true then.
  bool poll_cancelled();
  // The tokens the next pass feeds: the pending token, then its drafts.
  const std::vector<int>& rows();
  // The logits [rows][V] of that pass (it took `seconds`): verifies the drafts,
  // reports tokens, cuts rejected rows back. The logits need to live only during the call.
  void absorb(const float* logits, double seconds);

  Session& session() { return s_; }
  const GenerateResult& result() const { return r_; }

 private:
  enum class Phase { prefill, decode, done };
  void start_decode(const float* logits);
  bool emit(int id, const float* row);  // false: the generation ends with this token
  void finish_decode();
  bool cancelled() const { return opt_.cancelled && opt_.cancelled(); }

  Session& s_;
  std::vector<int> prompt_;
  GenerateOptions opt_;
  PrefixCache* cache_;
  OnToken on_token_;
  Sampler sampler_;
  Drafter drafter_;
  GenerateResult r_;
  Phase phase_ = Phase::prefill;
  bool started_ = false, drafting_;
  // Drafts proposed per pass: the whole --draft-max while every draft stands,
  // halved after a miss but never below one more than were accepted (a
  // rejected row costs a pass's compute for it and a rollback), doubled back
  // after a full success; DraftOptions::fixed_window keeps it at --draft-max.
  int draft_window_;
  size_t V_, reused_ = 0, fed_ = 0, feeding_ = 0;
  std::chrono::steady_clock::time_point t0_;
  std::vector<float> saved_logits_, lp_;
  TokenEvent ev_;
  const float* cur_ = nullptr;  // the logits row the pending token was sampled from
  int next_ = -1;               // sampled and reported, not yet fed
  std::vector<int> chunk_;
  double decode_ = 0;
  uint64_t bytes0_ = 0;
};

// Runs one generation of `prompt` in `s`. `cache` may be null (then s is reset
// first). on_token is called once per sampled token, in order.
GenerateResult generate(Session& s, std::span<const int> prompt, const GenerateOptions& opt, PrefixCache* cache,
                        const std::function<Verdict(const TokenEvent&)>& on_token);

// Stop sequences matched on generated text, across token boundaries. push()
// returns the text that can no longer be part of a stop sequence; a tail that
// might begin one is held back until it cannot. Once a sequence matched, the
// text before it has been returned and nothing after it ever is.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  std::string push(std::string_view text);
  std::string flush();  // end of generation without a match: everything held
  bool matched() const { return matched_; }
  const std::string& held() const { return held_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace sluice
