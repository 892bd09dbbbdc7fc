// k3/layers.h — the sublayers of one K3 layer, each over a chunk of T tokens.
//
// Inputs and outputs are row-major [T][width] FP32 arrays. Read model.cpp
// first: it strings these together in the order of spec §3.1. Matrices are
// multiplied through the spine (k3/spine.h), in the order they were bound;
// all arithmetic runs on the spine's backend (kernels/backend.h; AttnRes and
// the router are its attn_res and route ops, called from model.cpp).
#pragma once
#include <span>
#include <vector>

#include "checkpoint/config.h"
#include "io/expert_source.h"
#include "k3/spine.h"
#include "k3/state.h"
#include "k3/weights.h"

namespace sluice {

// KDA (spec §3.3): x [T][H] normed input -> out [T][H]; advances S and the conv history.
// With `undo`, records what kda_rollback needs (state.h: KdaUndo).
void kda_forward(const ModelConfig& c, Spine& sp, const KdaWeights& w, KdaLayerState& st, const float* x, int T, float* out,
                 KdaUndo* undo = nullptr);
// Rows of several sequences in one call: segment i is lens[i] consecutive rows
// advancing *states[i] (undos[i] may be null). Projections run over all rows
// at once; each row's output is bitwise what a call for its sequence alone gives.
void kda_forward_rows(const ModelConfig& c, Spine& sp, const KdaWeights& w, std::span<KdaLayerState* const> states,
                      std::span<const int> lens, std::span<KdaUndo* const> undos, const float* x, float* out);
// Cuts the chunk recorded in `undo` back to its first `keep` positions (bitwise a chunk of `keep`),
// on `be` with w's vectors owned by `owner` (the spine's).
void kda_rollback(const Backend& be, WeightOwner owner, const ModelConfig& c, const KdaWeights& w, KdaLayerState& st,
                  KdaUndo& undo, int keep);

// Gated NoPE MLA (spec §3.4), absorbed form: appends T positions to the cache.
void mla_forward(const ModelConfig& c, Spine& sp, const MlaWeights& w, MlaLayerCache& cache, const float* x, int T, float* out);

// Rows of several sequences, each against its own cache (as kda_forward_rows).
void mla_forward_rows(const ModelConfig& c, Spine& sp, const MlaWeights& w, std::span<MlaLayerCache* const> caches,
                      std::span<const int> lens, const float* x, float* out);

// Dense SiTU FFN (spec §3.5).
void dense_forward(const ModelConfig& c, Spine& sp, const DenseWeights& w, const float* y, int T, float* out);

// Latent MoE (spec §3.6). Routed experts come from `experts`; `chosen` gets
// [T][top-k] expert ids in descending biased score when not null.
void moe_forward(const ModelConfig& c, Spine& sp, const MoeWeights& w, int layer, ExpertSource& experts, const float* y,
                 int T, float* out, std::vector<int>* chosen);

}  // namespace sluice
