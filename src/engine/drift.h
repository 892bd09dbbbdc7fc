// engine/drift.h — what a lossy spine (int8) costs against the exact one, in
// numbers anyone can rerun (`sluice drift`, docs/packs.md).
//
// Two models of one checkpoint are run on the same inputs: `exact` (bf16 or
// the lossless pack: the same bits) and `lossy` (the int8 pack). Measured:
//   - held-out perplexity of both (engine/perplexity.h), when a text is given;
//   - greedy agreement: each model continues each prompt greedily for
//     new_tokens tokens on its own; the fraction of positions whose tokens are
//     the same, and of continuations that are the same throughout; plus the
//     teacher-forced top-1 agreement (the lossy model fed the exact model's
//     continuation: how often its argmax is the exact model's next token);
//   - per-layer hidden-state relative error ‖h_lossy − h_exact‖ / ‖h_exact‖
//     (the AttnRes partial sum after each layer, ForwardTrace::hidden) over
//     every prompt plus its exact continuation;
//   - max |Δlogit| over the same positions, and per named case (e.g. the
//     fixture's cases), beside the largest |logit| for scale.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"

namespace sluice {

struct DriftCase {
  std::string name;
  std::vector<int> tokens;
};

struct DriftOptions {
  std::vector<std::vector<int>> prompts;
  int new_tokens = 64;
  std::vector<int> text;  // held-out tokens; empty: no perplexity
  int ctx = 256;          // perplexity window
  std::vector<DriftCase> cases;
  std::function<void(const std::string& what, size_t done, size_t total)> progress;
};

struct DriftCaseResult {
  std::string name;
  int positions = 0;
  double max_dlogit = 0, max_logit = 0;
  int argmax_same = 0;
};

struct DriftReport {
  double ppl_exact = 0, ppl_lossy = 0;
  long ppl_tokens = 0;
  int prompts = 0, new_tokens = 0;
  long tokens_same = 0;          // positions with the same free-running greedy token
  int continuations_same = 0;    // prompts whose whole continuation is the same
  long forced_same = 0;          // teacher-forced top-1 agreement
  double mean_first_divergence = 0;  // mean index of the first differing token (new_tokens when none)
  std::vector<double> layer_rel_error;  // per layer
  double max_dlogit = 0, max_logit = 0;  // over the prompts and continuations
  std::vector<DriftCaseResult> cases;
};

DriftReport measure_drift(Model& exact, Model& lossy, const DriftOptions& opt);

}  // namespace sluice
