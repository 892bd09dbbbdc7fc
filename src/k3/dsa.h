// k3/dsa.h — K3.1 Pro's DSA layer (docs/k31-spec.md §3): an MLA layer whose
// queries attend only to the top-k positions a lightning indexer picks.
// mla.cpp calls these on a layer that has an indexer; the rest of the layer
// is K3's MLA unchanged.
#pragma once
#include <vector>

#include "checkpoint/config.h"
#include "k3/spine.h"
#include "k3/state.h"
#include "k3/weights.h"

namespace sluice {

// Whether this MLA layer carries an indexer (a DSA layer of a K3.1 model).
bool has_indexer(const MlaWeights& w);

// The indexer's rows for a chunk of T tokens: qi [T][NI·DI], w [T][NI]
// (scaled by 1/sqrt(NI·DI)), k [T][DI] after the key LayerNorm.
struct DsaRows {
  std::vector<float> qi, w, k;
};
// x: the layer's normed input; cq: the normed q latent. Multiplies the three
// indexer matrices in their use order (after g_proj, before kv_b).
DsaRows dsa_project(const ModelConfig& c, Spine& sp, const MlaWeights& w, const float* x, const float* cq, int T);

// One sequence's segment of Ts rows (from row0 of r): appends its keys to the
// cache's indexer keys (the latent rows are already appended), selects each
// query's top-k and attends over it (q, gate, att: the segment's rows).
void dsa_attend(const ModelConfig& c, const Backend& be, const DsaRows& r, size_t row0, int Ts, MlaLayerCache& cache,
                const MlaDims& d, const Bf16Ref& kv_b, const float* q, const float* gate, float* att);

}  // namespace sluice
