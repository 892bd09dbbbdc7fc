// Gated MLA with NoPE (spec §3.4), in the absorbed (latent) form: per head,
//   q̂ = K_hᵀ q_nope,  s(τ) = (q̂·c'(τ) + q_pe·k_pe(τ)) / sqrt(nope+rope),
//   ĉ = Σ_τ softmax(s)(τ) c'(τ),  a = U_h ĉ,  out = o_proj(a ⊙ σ(g_proj x)).
// K_h / U_h are the key / value rows of head h in kv_b_proj. No RoPE anywhere:
// the "rope" dims are used as they are. The cache keeps c' (after the norm) and
// the raw k_pe for every position.
#include <vector>

#include "k3/dsa.h"
#include "k3/layers.h"

namespace sluice {

void mla_forward(const ModelConfig& c, Spine& sp, const MlaWeights& w, MlaLayerCache& cache, const float* x, int T, float* out) {
  MlaLayerCache* one[1] = {&cache};
  const int lens[1] = {T};
  mla_forward_rows(c, sp, w, one, lens, x, out);
}

void mla_forward_rows(const ModelConfig& c, Spine& sp, const MlaWeights& w, std::span<MlaLayerCache* const> caches,
                      std::span<const int> lens, const float* x, float* out) {
  int T = 0;
  for (int n : lens) T += n;
  const int NH = c.num_attention_heads, NOPE = c.qk_nope_head_dim, ROPE = c.qk_rope_head_dim;
  const int QH = NOPE + ROPE, VD = c.v_head_dim, KVL = c.kv_lora_rank, QL = c.q_lora_rank;
  const int KVW = KVL + ROPE;  // cache row width
  const Backend& be = sp.backend();

  // Per call, not kept: the memory plan counts the largest sublayer's buffers once (working_bytes).
  std::vector<float> cq(size_t(T) * QL), q(size_t(T) * NH * QH), ckv(size_t(T) * KVW), gate(size_t(T) * NH * VD),
      att(size_t(T) * NH * VD);
  sp.matmul(w.q_a, x, T, cq.data());
  be.rmsnorm_rows(cq.data(), QL, sp.vec(w.q_a_norm), T, QL, c.mla_latent_norm_eps, cq.data(), QL);
  sp.matmul(w.q_b, cq.data(), T, q.data());
  sp.matmul(w.kv_a, x, T, ckv.data());
  sp.matmul(w.g, x, T, gate.data());
  const bool sparse = has_indexer(w);  // K3.1 Pro (k3/dsa.h)
  const DsaRows idx = sparse ? dsa_project(c, sp, w, x, cq.data(), T) : DsaRows{};

  const Bf16Ref kv_b = sp.whole(w.kv_b);
  const MlaDims d{NH, NOPE, ROPE, VD, KVL};
  // Each sequence's rows against its own cache; row0 is the segment's first row.
  for (size_t seg = 0, row0 = 0; seg < caches.size(); row0 += size_t(lens[seg]), seg++) {
    MlaLayerCache& cache = *caches[seg];
    const int Ts = lens[seg];
    // Append this chunk to the cache: c' = RMSNorm(c), k_pe raw.
    const int64_t base = cache.len;
    cache.kv.resize(size_t(base + Ts) * KVW);
    float* dst = cache.kv.data() + size_t(base) * KVW;
    const float* src = ckv.data() + row0 * KVW;
    be.rmsnorm_rows(src, KVW, sp.vec(w.kv_a_norm), Ts, KVL, c.mla_latent_norm_eps, dst, KVW);
    for (int t = 0; t < Ts; t++)
      for (int i = 0; i < ROPE; i++) dst[size_t(t) * KVW + KVL + i] = src[size_t(t) * KVW + KVL + i];
    cache.len = base + Ts;
    if (sparse) {
      dsa_attend(c, be, idx, row0, Ts, cache, d, kv_b, q.data() + row0 * NH * QH, gate.data() + row0 * NH * VD,
                 att.data() + row0 * NH * VD);
      continue;
    }
    StateStamp stamp{cache.stamp};
    be.mla_attend(d, kv_b, cache.kv.data(), base, Ts, q.data() + row0 * NH * QH, gate.data() + row0 * NH * VD,
                  att.data() + row0 * NH * VD, &stamp);
    cache.stamp = stamp.to;
  }

  sp.matmul(w.o, att.data(), T, out);
}

}  // namespace sluice
