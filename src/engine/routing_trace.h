// engine/routing_trace.h — the router's real choices over a text, for cache studies.
//
// Runs `tokens` through the model in chunks of `ctx` (a fresh sequence per
// chunk, as perplexity does) and records every MoE layer's top-k per token, in
// the layout io/expert_cache.h's simulate_cache() replays. Routing is the
// same in prefill and decode (bitwise), so a prefill trace is a decode trace.
#pragma once
#include <span>

#include "k3/model.h"
#include "io/expert_cache.h"

namespace sluice {

RoutingTrace routing_trace(Model& m, std::span<const int> tokens, int ctx);

}  // namespace sluice
