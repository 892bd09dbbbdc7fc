// engine/sampler.h — choosing the next token from a row of logits.
//
// A Sampler turns logits into a token id under temperature / top-k / top-p,
// drawing from its own seeded PRNG (xoshiro256**, seeded through splitmix64),
// so the same seed and the same logits give the same tokens on every platform
// and standard library; std::*_distribution is never used (its output is
// implementation-defined). Temperature 0 is greedy argmax (lowest id on ties)
// and draws nothing.
//
// Order of operations (as OpenAI-style servers document it): top-k keeps the k
// largest logits; the rest are divided by the temperature and softmaxed (in
// double); top-p then keeps the smallest most-probable prefix whose mass reaches
// top_p (at least one token); one draw picks from what is left, renormalised.
// Candidates are ordered by logit, descending, lower id first on ties.
//
// Logprobs are always those of the model: log-softmax of the raw logits,
// independent of temperature and truncation.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace sluice {

// xoshiro256** (Blackman & Vigna), state filled by splitmix64 from one seed.
struct Rng {
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits
  uint64_t s[4];
};

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;        // (0, 1]; 1: off
  int top_k = 0;             // 0: off
  uint64_t seed = 0;
};

// Throws sluice::Error naming the parameter when a value is out of range.
void check_sampling_params(const SamplingParams& p);

struct Candidate {
  int id;
  double p;  // probability after truncation, renormalised
};

// The distribution a Sampler with `p` draws from, most probable first (tests,
// and anyone who wants to see it). Greedy gives one candidate with p = 1.
std::vector<Candidate> sampling_distribution(std::span<const float> logits, const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);  // checks p
  int sample(std::span<const float> logits);
  // Speculative sampling against a deterministic draft token: accepts `draft`
  // with probability p(draft), p being the distribution sample() draws from,
  // and on rejection returns a token drawn from p with `draft` removed and
  // renormalised, so the token returned is distributed exactly as sample()'s.
  // Done with sample()'s own single draw u: accepted when u falls in the
  // draft's share of [0,1) (probability p(draft)); otherwise u is uniform over
  // the other shares, which picks from the rest renormalised. Hence the tokens
  // (and the generator's state) are also exactly those of sample() on the same
  // logits: seeded output does not depend on what was drafted. *accepted says
  // which happened. Greedy: the argmax, accepted when it is the draft.
  int sample_draft(std::span<const float> logits, int draft, bool* accepted);
  bool greedy() const { return p_.temperature == 0.0f || p_.top_k == 1; }

 private:
  SamplingParams p_;
  Rng rng_;
  std::vector<std::pair<float, int>> cand_;  // scratch: (logit, id)
  std::vector<double> prob_;                 // scratch
};

// Lowest id among the largest logits.
int argmax_logit(std::span<const float> logits);

// out[i] = logits[i] - logsumexp(logits), accumulated in double.
void log_softmax(std::span<const float> logits, std::vector<float>& out);

struct TokenLogprob {
  int id;
  float logprob;
};
// The k most probable entries of a log-softmax row, descending, lower id first on ties.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logprobs, int k);

}  // namespace sluice
