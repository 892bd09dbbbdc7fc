// cli/expert_stats.h — the `--stats` line of run/logits: where experts' bytes came from.
#pragma once
#include <string>

#include "model/model.h"

namespace sluice::cli {

// One JSON object: for a stream-mode model, spans requested / fetched / cache
// hits, network bytes (and per token), retries, cache size; else {"expert_source":"local"}.
std::string expert_stats_json(const Model& model, int tokens);

}  // namespace sluice::cli
