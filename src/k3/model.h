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
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "k3/experts.h"
#include "k3/state.h"
#include "k3/weights.h"

namespace sluice {

struct Model {
  Checkpoint ck;
  GlobalWeights globals;
  std::vector<LayerWeights> layers;
  std::unique_ptr<ExpertSource> experts;

  const ModelConfig& config() const { return ck.config; }
};

// Opens DIR, binds and loads the spine, and reads experts with `experts` (pread if null).
std::unique_ptr<Model> open_model(const std::string& dir);

// What a forward pass can report besides logits (tests and statistics).
struct ForwardTrace {
  std::vector<float> hidden;  // [layers][T][H]: the AttnRes partial sum P after each layer's FFN
  std::vector<int> experts;   // [moe layers][T][top-k]: routed experts, descending biased score
};

enum class Logits { None, Last, All };

// Runs `tokens` from state.pos on; fills `logits` with [V] (Last) or [T][V] (All).
void forward(Model& m, SequenceState& state, std::span<const int> tokens, Logits which,
             std::vector<float>* logits, ForwardTrace* trace = nullptr);

}  // namespace sluice
