// engine/routing_trace.h — the router's real choices over a text, for cache studies.
//
// Runs `tokens` through the model in chunks of `ctx` (a fresh sequence per
// chunk, as perplexity does) and records every MoE layer's top-k per token, in
// the layout io/expert_cache.h's simulate_cache() replays. Routing is the
// same in prefill and decode (bitwise), so a prefill trace is a decode trace.
// A chunk is fed in pieces of kRoutingTracePiece tokens, so `progress` (may be
// empty: tokens done, of all) is told at the start and after every piece.
#pragma once
#include <functional>
#include <span>

#include "model/model.h"
#include "io/expert_cache.h"

namespace sluice {

inline constexpr size_t kRoutingTracePiece = 64;

RoutingTrace routing_trace(Model& m, std::span<const int> tokens, int ctx,
                           const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace sluice
