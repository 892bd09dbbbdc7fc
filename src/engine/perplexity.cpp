#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "engine/session.h"

namespace sluice {

PerplexityResult perplexity(Model& m, std::span<const int> tokens, int ctx,
                            const std::function<void(size_t done, size_t total)>& progress) {
  if (ctx < 2) fail("perplexity", "--ctx must be at least 2");
  if (tokens.size() < 2) fail("perplexity", "the text must hold at least 2 tokens");
  const int V = m.config().vocab_size;
  double nll = 0;
  long n = 0;
  if (progress) progress(0, tokens.size());
  for (size_t at = 0; at + 1 < tokens.size(); at += size_t(ctx)) {
    const size_t len = std::min(size_t(ctx), tokens.size() - at);
    if (len < 2) break;
    Session s(m);
    const std::vector<float>& logits = s.prefill_all(tokens.subspan(at, len));
    for (size_t t = 0; t + 1 < len; t++) {
      const float* row = logits.data() + t * size_t(V);
      const float mx = *std::max_element(row, row + V);
      double sum = 0;
      for (int i = 0; i < V; i++) sum += std::exp(double(row[i]) - mx);
      nll += std::log(sum) + mx - double(row[tokens[at + t + 1]]);
      n++;
    }
    if (progress && at + len < tokens.size()) progress(at + len, tokens.size());
  }
  if (progress) progress(tokens.size(), tokens.size());
  PerplexityResult r;
  r.predicted = n;
  r.mean_nll = nll / double(n);
  r.perplexity = std::exp(r.mean_nll);
  return r;
}

}  // namespace sluice
