// engine/read_counter.h — counts the routed-expert bytes a model reads.
//
// count_expert_reads() wraps a model's ExpertSource so that every expert it is
// asked for adds its span size (ModelConfig::expert_span_bytes()) to the
// counters. With the plain pread source that is exactly the bytes read from
// disk; a caching source below the wrapper would make it bytes requested.
#pragma once
#include <atomic>
#include <cstdint>

#include "k3/model.h"

namespace sluice {

struct ReadCounters {
  std::atomic<uint64_t> expert_fetches{0};
  std::atomic<uint64_t> expert_bytes{0};
};

// Replaces m.experts with a counting wrapper around it; `c` must outlive the model.
void count_expert_reads(Model& m, ReadCounters* c);

}  // namespace sluice
