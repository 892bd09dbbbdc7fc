// model/memory_plan.h — how a model spent its RAM budget when it opened.
#pragma once
#include <cstdint>
#include <vector>

namespace sluice {

// How the budget was spent when the model was opened. Order of claims: what
// is always resident (vectors, routers), sequence state, in-flight expert
// buffers; then the spine (layers and head), all of it if it fits, else a
// streaming ring plus as many units as fit; the expert cache gets the rest.
// (A resident spine byte saves a read on every token; a cached expert byte
// only on the tokens that route to that expert.)
struct MemoryPlan {
  uint64_t budget = 0;
  uint64_t baseline = 0;        // the process's resident bytes when the plan was made
  uint64_t working = 0;         // forward-pass buffers, logits, tokenizer, slack, the caller's extra_bytes
  uint64_t minimum = 0;         // the engine's working minimum for this model
  uint64_t fixed = 0;           // vectors and routers: resident whatever the budget
  uint64_t spine_total = 0;     // all spine matrices (layers and head)
  uint64_t spine_resident_bytes = 0;  // of which resident
  uint64_t ring = 0;            // the streaming ring (0 when all resident)
  uint64_t spine_held = 0;      // resident units + ring
  bool spine_resident = true;   // every unit resident
  std::vector<bool> resident_pieces;  // per spine piece (k3/spine.h)
  uint64_t state_reserve = 0;   // sequence state at max_context (1 + saved_states of them)
  uint64_t expert_buffers = 0;  // in-flight expert reads that bypass the cache
  uint64_t expert_cache = 0;    // what is left for caching experts
};

}  // namespace sluice
