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

namespace sluice {

struct MemoryPlan;

struct ModelOptions {
  // Bound on what the engine keeps in RAM: spine, expert cache, state, buffers.
  // 0 = a safe share of physical memory (default_ram_budget()).
  uint64_t ram_budget = 0;
  // Context length the budget reserves sequence state for.
  int max_context = 4096;
  // Reads in flight (io_uring queue depth) for expert reads and spine
  // streaming together (reader_queue_depth splits it); 0: default_queue_depth()
  // of the model's directory.
  int queue_depth = 0;
  // Read experts with plain pread and no cache (the simplest source; for comparisons).
  bool pread_experts = false;
  // Where experts missing from local disk come from (hub/http_experts.h's
  // stream_miss_filler for a stream install); empty: all experts are local.
  MissFillerFactory miss_filler;
  // Spine matrices are read (resident or streamed) in pieces of whole rows of
  // at most this many bytes; the streaming ring needs room for three.
  uint64_t spine_chunk_bytes = 64ull << 20;
  // The streaming ring when the spine does not fit (0: an eighth of what the
  // budget leaves for the spine, at most 512 MiB; never below the minimum).
  uint64_t spine_ring_bytes = 0;
  // Which copy of the spine to read: "bf16" (the shards), "lossless" (the
  // pack beside them, bit-identical), "int8"; empty: lossless when its pack
  // is there, else bf16. Asking for a pack that is not there is an error.
  std::string spine;
  // The pack file to read instead of DIR/spine.<format>.pack (a checkpoint
  // folder that cannot be written to): it must hold the format `spine` names
  // (lossless when empty) and be bound to this checkpoint, like any pack.
  std::string spine_pack;
  // Ignore DIR/stripe.json (io/stripe.h): read every expert from the shards.
  bool no_stripe = false;
  // whole_process: the whole process lives within ram_budget (the CLI's
  // contract). The plan first sets aside the process's resident memory when it
  // is made (code, libraries, heap: its baseline), the forward pass's working
  // buffers for chunks of chunk_tokens tokens (every position's logits when
  // all_logits), and extra_bytes the caller keeps beside the engine (saved
  // prefix states, bench's buffers). Off: the budget bounds the engine's parts.
  bool whole_process = false;
  // Sequence states the caller keeps besides the live one (a prefix cache),
  // reserved like it; MemoryPlan::state_reserve covers them all.
  int saved_states = 0;
  int chunk_tokens = 256;
  bool all_logits = false;
  // Rows whose logits one pass returns when more than one and not all_logits
  // (a multi-sequence pass: each sequence's rows and drafts; engine/batch.h
  // plan_batch_passes); 0: one row.
  int logit_rows = 0;
  uint64_t extra_bytes = 0;
  // Reports while the model opens (either may be empty): the memory plan once
  // it is made, then the resident spine's bytes read so far (done, total).
  std::function<void(const MemoryPlan&)> on_plan;
  // Called after on_plan with what the VRAM placement needs (cli/vram_option.h).
  std::function<void(const Checkpoint&, const Spine&, const MemoryPlan&)> on_placement;
  std::function<void(uint64_t done, uint64_t total)> load_progress;
  // Open a model whose config keys or tensors the engine does not implement
  // (checkpoint/checkpoint.h): each is passed to on_warning instead of refused.
  bool allow_unknown = false;
  std::function<void(const std::string&)> on_warning;
  // The op table the model computes on (kernels/backend.h; kernels/device.h
  // picks it for --device); nullptr: cpu_backend().
  const Backend* backend = nullptr;
};

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

// Prefetch guesses and how well they did (decode steps), per layer.
struct Prefetcher {
  std::vector<std::vector<int>> last_route;  // experts the latest token chose, per layer
  std::vector<std::vector<int>> guess;       // the current guess for each layer, sorted
  std::vector<uint64_t> needed, guessed;     // per layer: experts needed, and of those guessed
  std::vector<uint64_t> guesses;             // per layer: experts guessed (precision = guessed / guesses)
  // Discipline: how many of its top-k the earliest lookahead (layer n-1's
  // FFN input) guesses in a decode step (-1: all k; a prefill chunk always
  // guesses all), and whether the late lookahead (layer n's estimated FFN
  // input) withdraws the earlier guesses it does not confirm. Chosen by
  // measurement (docs/decisions.md, "Reads"): the early guesses it does not
  // confirm were mostly wrong and, read before it came, wasted 0.3 GB a token.
  int early_per_row = 0;
  bool replace = true;
  double recall() const {
    uint64_t n = 0, g = 0;
    for (size_t l = 0; l < needed.size(); l++) n += needed[l], g += guessed[l];
    return n ? double(g) / double(n) : 0.0;
  }
  double precision() const {
    uint64_t n = 0, g = 0;
    for (size_t l = 0; l < guesses.size() && l < guessed.size(); l++) n += guesses[l], g += guessed[l];
    return n ? double(g) / double(n) : 0.0;
  }
};

struct Model {
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

uint64_t default_ram_budget();
// The queue depth for models in `dir`: what `sluice probe --save` recorded for
// its disk (io/depth_profile.h), else 16; *saved says which.
int default_queue_depth(const std::string& dir, bool* saved = nullptr);
// Reads in flight for each of the engine's readers: a queue depth is the
// device's, so when the spine streams beside the experts its loader and the
// expert reader share it (half each); with the spine resident the expert
// reader has it all. Two readers at the full depth each put twice the device's
// depth in flight: on the H200 machine's disk the 4G streamed k3-slice read at
// 0.84-1.03 of the bare spine pass with 2 x 16 and 0.94-1.00 with 2 x 8
// (docs/decisions.md, "Reads: queue depth and prefetch guesses").
int reader_queue_depth(int depth, bool spine_streams);
// The process's resident set now (/proc/self/statm), in bytes; 0 if unknown.
uint64_t resident_bytes();
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
std::unique_ptr<Model> open_model(const std::string& dir, const ModelOptions& opt = {});

// What a forward pass can report besides logits (tests and statistics).
struct ForwardTrace {
  std::vector<float> hidden;  // [layers][T][H]: the AttnRes partial sum P after each layer's FFN
  std::vector<int> experts;   // [moe layers][T][top-k]: routed experts, descending biased score
};

enum class Logits { None, Last, All };

// Runs `tokens` from state.pos on; fills `logits` with [V] (Last) or [T][V] (All).
// With `undo`, the chunk can afterwards be cut back by rollback() (speculative
// verification: engine/generate.cpp).
void forward(Model& m, SequenceState& state, std::span<const int> tokens, Logits which,
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
void forward_rows(Model& m, std::span<const SequenceRows> seqs, Logits which, std::vector<float>* logits,
                  ForwardTrace* trace = nullptr);

// Cuts the last chunk forwarded with `undo` back to its first `keep` tokens:
// the state is then bitwise what forwarding only those tokens leaves. Reads no
// weight matrix; costs `keep` positions of the KDA recurrence per KDA layer.
void rollback(Model& m, SequenceState& state, ChunkUndo& undo, int keep);

}  // namespace sluice
