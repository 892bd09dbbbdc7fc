// model/model.h — a model as the engine, the server and the CLI see it: its
// config and memory plan, forward passes over rows of sequences, and what
// bench and the statistics read. Each architecture implements it in its own
// folder (K3 and K3.1 Pro: k3/k3_model.h); arch/open.h opens a directory as
// the architecture its config.json names. Nothing above this header knows
// an architecture's layers, weights or state.
//
// The contract every architecture keeps (the engine's tests rely on it):
// forward() of a chunk of T tokens gives bitwise the logits and state of T
// chunks of one token; forward_rows() gives each sequence's rows bitwise what
// forwarding that sequence alone gives; rollback() leaves the state bitwise
// what forwarding only the kept tokens leaves.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "io/expert_source.h"
#include "model/memory_plan.h"
#include "model/options.h"
#include "model/state.h"
#include "model/step_mix.h"

namespace sluice {

class DenseReads;
struct Prefetcher;

// What a forward pass can report besides logits (tests and statistics).
struct ForwardTrace {
  std::vector<float> hidden;  // [layers][T][H]: the residual stream after each layer
  std::vector<int> experts;   // [moe layers][T][top-k]: routed experts, descending score
};

enum class Logits { None, Last, All };

// One sequence's rows in a pass over several (Model::forward_rows).
struct ModelRows {
  ModelState* state = nullptr;
  std::span<const int> tokens;
  ModelUndo* undo = nullptr;  // as Model::forward's
  bool last_only = false;     // only its last row's logits, under Logits::All too
};

// What a model lets bench, --stats and the server's metrics look at. A
// pointer is null where the model has no such part (no expert reads, no
// prefetch guesses, no dense weights on disk).
struct ModelIo {
  DenseReads* spine = nullptr;         // the dense weights' reads
  ExpertSource* experts = nullptr;     // routed experts' reads and cache
  const Prefetcher* prefetcher = nullptr;
  uint64_t globals_bytes_read = 0;     // embedding rows read
  int queue_depth = 0;                 // reads in flight in all, as resolved when the model opened
  int reader_depth = 0;                // each reader's share of it
};

class Model {
 public:
  virtual ~Model() = default;

  // The checkpoint: its config, directory and files.
  virtual const Checkpoint& checkpoint() const = 0;
  const ModelConfig& config() const { return checkpoint().config; }
  virtual const MemoryPlan& plan() const = 0;
  // The op table it computes on (kernels/backend.h).
  virtual const Backend* backend() const = 0;

  // A new sequence, at position 0.
  virtual ModelState new_state() const = 0;
  // Runs `tokens` from state.pos() on; fills `logits` with [V] (Last) or
  // [T][V] (All). With `undo`, the chunk can afterwards be cut back by rollback().
  virtual void forward(ModelState& state, std::span<const int> tokens, Logits which, std::vector<float>* logits,
                       ForwardTrace* trace = nullptr, ModelUndo* undo = nullptr) = 0;
  // One pass over rows of several sequences, each advancing its own state.
  // logits: All: [wanted rows][V] in order (a last_only sequence gives its
  // last row only); Last: [sequences][V], each one's last row.
  virtual void forward_rows(std::span<const ModelRows> seqs, Logits which, std::vector<float>* logits,
                            ForwardTrace* trace = nullptr) = 0;
  // Cuts the last chunk forwarded with `undo` back to its first `keep` tokens.
  virtual void rollback(ModelState& state, ModelUndo& undo, int keep) = 0;

  virtual ModelIo io() const { return {}; }
  // What a decode step pushes through each kernel under this plan, and its
  // token boundary's share (model/step_mix.h); zeros when not modelled.
  virtual StepMix step_mix() const { return {}; }
  virtual StepMix token_boundary_mix() const { return {}; }
};

}  // namespace sluice
