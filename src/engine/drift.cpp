#include "engine/drift.h"

#include <algorithm>
#include <cmath>

#include "engine/perplexity.h"
#include "engine/session.h"

namespace sluice {

namespace {

struct Pass {
  std::vector<float> logits;  // [T][V]
  ForwardTrace trace;
};

Pass run(Model& m, const std::vector<int>& tokens) {
  Pass p;
  ModelState st = m.new_state();
  m.forward(st, tokens, Logits::All, &p.logits, &p.trace);
  return p;
}

void max_diff(const std::vector<float>& a, const std::vector<float>& b, double* dmax, double* amax) {
  for (size_t i = 0; i < a.size(); i++) {
    *dmax = std::max(*dmax, double(std::fabs(a[i] - b[i])));
    *amax = std::max(*amax, double(std::fabs(a[i])));
  }
}

}  // namespace

DriftReport measure_drift(Model& exact, Model& lossy, const DriftOptions& opt) {
  const ModelConfig& c = exact.config();
  const int V = c.vocab_size, H = c.hidden_size, L = c.num_hidden_layers;
  DriftReport r;
  auto progress = [&](const char* what, size_t done, size_t total) {
    if (opt.progress) opt.progress(what, done, total);
  };
  if (!opt.text.empty()) {
    const PerplexityResult a = perplexity(exact, opt.text, opt.ctx, [&](size_t d, size_t t) { progress("perplexity (exact)", d, t); });
    const PerplexityResult b = perplexity(lossy, opt.text, opt.ctx, [&](size_t d, size_t t) { progress("perplexity (int8)", d, t); });
    r.ppl_exact = a.perplexity;
    r.ppl_lossy = b.perplexity;
    r.ppl_tokens = a.predicted;
  }
  r.prompts = int(opt.prompts.size());
  r.new_tokens = opt.new_tokens;
  std::vector<double> err(size_t(L), 0.0), norm(size_t(L), 0.0);
  double first_div = 0;
  for (size_t i = 0; i < opt.prompts.size(); i++) {
    progress("greedy", i, opt.prompts.size());
    const std::vector<int>& prompt = opt.prompts[i];
    Session se(exact), sl(lossy);
    const std::vector<int> ge = generate_greedy(se, prompt, opt.new_tokens);
    const std::vector<int> gl = generate_greedy(sl, prompt, opt.new_tokens);
    int first = opt.new_tokens;
    for (int k = 0; k < opt.new_tokens; k++) {
      const bool same = k < int(ge.size()) && k < int(gl.size()) && ge[size_t(k)] == gl[size_t(k)];
      r.tokens_same += same;
      if (!same && first == opt.new_tokens) first = k;
    }
    first_div += first;
    r.continuations_same += first == opt.new_tokens;
    // Teacher-forced: both fed the prompt and the exact continuation.
    std::vector<int> seq = prompt;
    seq.insert(seq.end(), ge.begin(), ge.end());
    const Pass pe = run(exact, seq), pl = run(lossy, seq);
    const int T = int(seq.size());
    for (size_t k = 0; k < ge.size(); k++) {
      const size_t row = prompt.size() - 1 + k;  // predicts ge[k]
      const float* l = pl.logits.data() + row * size_t(V);
      r.forced_same += argmax(std::span<const float>(l, size_t(V))) == ge[k];
    }
    max_diff(pe.logits, pl.logits, &r.max_dlogit, &r.max_logit);
    for (int l = 0; l < L; l++)
      for (size_t j = size_t(l) * T * H; j < size_t(l + 1) * T * H; j++) {
        const double a = pe.trace.hidden[j], b = pl.trace.hidden[j];
        err[size_t(l)] += (b - a) * (b - a);
        norm[size_t(l)] += a * a;
      }
  }
  progress("greedy", opt.prompts.size(), opt.prompts.size());
  if (!opt.prompts.empty()) r.mean_first_divergence = first_div / double(opt.prompts.size());
  for (int l = 0; l < L; l++) r.layer_rel_error.push_back(norm[size_t(l)] > 0 ? std::sqrt(err[size_t(l)] / norm[size_t(l)]) : 0.0);
  for (const DriftCase& k : opt.cases) {
    const Pass pe = run(exact, k.tokens), pl = run(lossy, k.tokens);
    DriftCaseResult cr;
    cr.name = k.name;
    cr.positions = int(k.tokens.size());
    max_diff(pe.logits, pl.logits, &cr.max_dlogit, &cr.max_logit);
    for (int t = 0; t < cr.positions; t++) {
      const float* a = pe.logits.data() + size_t(t) * V;
      const float* b = pl.logits.data() + size_t(t) * V;
      cr.argmax_same += argmax(std::span<const float>(a, size_t(V))) == argmax(std::span<const float>(b, size_t(V)));
    }
    r.cases.push_back(cr);
  }
  return r;
}

}  // namespace sluice
