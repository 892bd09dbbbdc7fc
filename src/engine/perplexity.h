// engine/perplexity.h — how well a model predicts a text: exp(mean NLL).
//
// The tokens are cut into windows of `ctx` tokens, each run as one fresh
// prefill; every position but a window's first predicts the next token. The
// log-softmax is computed in double from the FP32 logits.
#pragma once
#include <functional>
#include <span>

#include "model/model.h"

namespace sluice {

struct PerplexityResult {
  double mean_nll = 0;
  double perplexity = 0;
  long predicted = 0;  // tokens whose probability was scored
};

// progress(tokens scored or skipped so far, all tokens), when given, is called
// before the first window and after each.
PerplexityResult perplexity(Model& m, std::span<const int> tokens, int ctx,
                            const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace sluice
