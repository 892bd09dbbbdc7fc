// K3.1 Pro's lightning indexer and sparse MLA (docs/k31-spec.md §3): the
// indexer's projections for a chunk, and per sequence the key append, the
// top-k selection and the attention over it. The arithmetic is the backend's
// (layernorm_rows, dsa_select, mla_attend_sparse); this file only strings it.
#include "k3/dsa.h"

#include <algorithm>
#include <cmath>

namespace sluice {

bool has_indexer(const MlaWeights& w) { return w.idx_q_b.rows > 0; }

DsaRows dsa_project(const ModelConfig& c, Spine& sp, const MlaWeights& w, const float* x, const float* cq, int T) {
  const int NI = c.dsa_n_heads, DI = c.dsa_head_dim;
  DsaRows r;
  r.qi.resize(size_t(T) * NI * DI);
  r.w.resize(size_t(T) * NI);
  r.k.resize(size_t(T) * DI);
  // §3.1 steps 1, 2, 5: queries from the normed q latent, key and head weights from x.
  sp.matmul(w.idx_q_b, cq, T, r.qi.data());
  sp.matmul(w.idx_k, x, T, r.k.data());
  sp.matmul(w.idx_w, x, T, r.w.data());
  sp.backend().layernorm_rows(r.k.data(), DI, sp.vec(w.idx_k_norm_w), sp.vec(w.idx_k_norm_b), T, DI, c.dsa_k_norm_eps,
                              r.k.data(), DI);
  // Step 7's constant 1/sqrt(NI·DI), folded into w (exact for K3.1's 1/64).
  const float scale = 1.0f / std::sqrt(float(NI) * float(DI));
  for (float& v : r.w) v *= scale;
  return r;
}

void dsa_attend(const ModelConfig& c, const Backend& be, const DsaRows& r, size_t row0, int Ts, MlaLayerCache& cache,
                const MlaDims& d, const Bf16Ref& kv_b, const float* q, const float* gate, float* att) {
  const int NI = c.dsa_n_heads, DI = c.dsa_head_dim, K = c.dsa_topk;
  // The mla cache has already grown by Ts rows (mla.cpp); the keys follow it
  // before scoring, so a query scores itself (§3.1 step 6).
  const int64_t base = cache.len - Ts;
  cache.idx.resize(size_t(cache.len) * DI);
  std::copy(r.k.begin() + std::ptrdiff_t(row0 * DI), r.k.begin() + std::ptrdiff_t((row0 + size_t(Ts)) * DI),
            cache.idx.begin() + std::ptrdiff_t(size_t(base) * DI));
  std::vector<int> sel(size_t(Ts) * size_t(K)), nsel(static_cast<size_t>(Ts));
  be.dsa_select(DsaDims{NI, DI, K}, r.qi.data() + row0 * size_t(NI) * DI, r.w.data() + row0 * size_t(NI),
                cache.idx.data(), base, Ts, sel.data(), nsel.data());
  StateStamp stamp{cache.stamp};
  be.mla_attend_sparse(d, kv_b, cache.kv.data(), base, Ts, q, gate, sel.data(), nsel.data(), K, att, &stamp);
  cache.stamp = stamp.to;
}

}  // namespace sluice
