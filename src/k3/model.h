// k3/model.h — the Kimi K3 text model: weights, and the forward pass.
//
// forward() runs a chunk of tokens through all layers (layer-major: every
// token of the chunk through layer l, then l+1), advancing a SequenceState.
// A chunk of T tokens gives bitwise the same logits and state as T chunks of
// one token: every cross-position dependency (KDA recurrence, MLA cache) is
// processed in sequence order, and every per-token reduction has a fixed order.
// Numerics: FP32 activations and accumulation over the shipped bf16/MXFP4
// weights (the fixture oracle's contract); see docs/numerics.md.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "io/expert_source.h"
#include "k3/spine.h"
#include "k3/state.h"
#include "k3/weights.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "model/options.h"
#include "model/prefetcher.h"

namespace sluice {

// K3's parts, which its forward pass reads (k3/k3_model.h puts them behind
// model/model.h for everything above k3/).
struct K3Model {
  Checkpoint ck;
  MemoryPlan plan;
  // Where the forward pass computes (kernels/backend.h): ModelOptions::backend,
  // else the CPU entry of the kernel choice (fast::isa()) when the model
  // opened. The spine uses the same.
  const Backend* backend = nullptr;
  GlobalWeights globals;
  std::unique_ptr<Spine> spine;
  std::unique_ptr<ExpertSource> experts;
  Prefetcher prefetcher;
  uint64_t globals_bytes_read = 0;  // embedding rows
  int queue_depth = 16;             // reads in flight in all, as resolved when the model opened
  int reader_depth = 16;            // each reader's share of it (reader_queue_depth): the expert reader, the streaming spine's loader

  const ModelConfig& config() const { return ck.config; }
};

// Working memory a forward pass of T tokens needs beyond the plan's parts
// (activations, logits, the tokenizer's tables), generously rounded up.
// Working buffers for passes of T rows of which `logit_rows` return logits.
uint64_t working_bytes(const ModelConfig& c, int T, int logit_rows);
// Plans memory for `ck` (its spine bound as `spine`) under `opt`; throws naming
// the minimum if the budget is below it.
MemoryPlan plan_memory(const Checkpoint& ck, const Spine& spine, const ModelOptions& opt);

// The pack ModelOptions::spine asks for (nullptr: read the bf16 shards), at
// `pack_file` when given (ModelOptions::spine_pack), else beside the shards.
std::shared_ptr<const Pack> open_spine_pack(const Checkpoint& ck, const std::string& spine,
                                            const std::string& pack_file = "");
// Whether the pack `spine` names (lossless when empty) is beside ck's shards.
bool pack_exists(const Checkpoint& ck, const std::string& spine);

// Opens DIR: checkpoint, memory plan, spine (resident or streamed), expert source.
std::unique_ptr<K3Model> open_k3_model(const std::string& dir, const ModelOptions& opt = {});

// Runs `tokens` from state.pos on; fills `logits` with [V] (Last) or [T][V] (All).
// With `undo`, the chunk can afterwards be cut back by rollback() (speculative
// verification: engine/generate.cpp).
void forward(K3Model& m, SequenceState& state, std::span<const int> tokens, Logits which,
             std::vector<float>* logits, ForwardTrace* trace = nullptr, ChunkUndo* undo = nullptr);

// One pass over rows of several sequences: each SequenceRows advances its own
// state by its tokens (its attention sees only its own state), while every
// matrix, the spine and each distinct routed expert, is read once for all rows.
// Each row's logits are bitwise what forwarding its sequence alone gives.
// logits: All: [all rows][V] in order; Last: [sequences][V], each one's last row.
// A sequence marked last_only gives only its last row under All too (a prompt
// chunk riding in a pass of decode rows: engine/batch.h), so logits then holds
// [wanted rows][V] in sequence order.
struct SequenceRows {
  SequenceState* state = nullptr;
  std::span<const int> tokens;
  ChunkUndo* undo = nullptr;  // as forward()'s
  bool last_only = false;
};
void forward_rows(K3Model& m, std::span<const SequenceRows> seqs, Logits which, std::vector<float>* logits,
                  ForwardTrace* trace = nullptr);

// Cuts the last chunk forwarded with `undo` back to its first `keep` tokens:
// the state is then bitwise what forwarding only those tokens leaves. Reads no
// weight matrix; costs `keep` positions of the KDA recurrence per KDA layer.
void rollback(K3Model& m, SequenceState& state, ChunkUndo& undo, int keep);

}  // namespace sluice
