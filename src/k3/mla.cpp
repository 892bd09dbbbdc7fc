// Gated MLA with NoPE (spec §3.4), in the absorbed (latent) form: per head,
//   q̂ = K_hᵀ q_nope,  s(τ) = (q̂·c'(τ) + q_pe·k_pe(τ)) / sqrt(nope+rope),
//   ĉ = Σ_τ softmax(s)(τ) c'(τ),  a = U_h ĉ,  out = o_proj(a ⊙ σ(g_proj x)).
// K_h / U_h are the key / value rows of head h in kv_b_proj. No RoPE anywhere:
// the "rope" dims are used as they are. The cache keeps c' (after the norm) and
// the raw k_pe for every position.
#include <cmath>
#include <cstring>
#include <vector>

#include "base/numeric.h"
#include "k3/layers.h"
#include "kernels/fast.h"
#include "kernels/ref.h"

namespace sluice {

// A shard's tensors need not be 2-byte aligned (a header of odd length is
// valid safetensors), so kv_b's elements are loaded bytewise.
inline float bf16_at(const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_f32(h);
}

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
  const int KVB = NOPE + VD;   // kv_b rows per head
  const float scale = 1.0f / std::sqrt(float(QH));

  std::vector<float> cq(size_t(T) * QL), q(size_t(T) * NH * QH), ckv(size_t(T) * KVW), gate(size_t(T) * NH * VD);
  sp.matmul(w.q_a, x, T, cq.data());
  for (int t = 0; t < T; t++) {
    float* r = cq.data() + size_t(t) * QL;
    ref::rmsnorm(r, w.q_a_norm.data(), QL, c.mla_latent_norm_eps, r);
  }
  sp.matmul(w.q_b, cq.data(), T, q.data());
  sp.matmul(w.kv_a, x, T, ckv.data());
  sp.matmul(w.g, x, T, gate.data());

  const uint16_t* kv_b = sp.whole(w.kv_b);
  std::vector<float> att(size_t(T) * NH * VD), qhat(static_cast<size_t>(KVL)), chat(static_cast<size_t>(KVL)), score;
  // Each sequence's rows against its own cache; row0 is the segment's first row.
  for (size_t seg = 0, row0 = 0; seg < caches.size(); row0 += size_t(lens[seg]), seg++) {
    MlaLayerCache& cache = *caches[seg];
    const int Ts = lens[seg];
    // Append this chunk to the cache: c' = RMSNorm(c), k_pe raw.
    const int64_t base = cache.len;
    cache.kv.resize(size_t(base + Ts) * KVW);
    for (int t = 0; t < Ts; t++) {
      float* dst = cache.kv.data() + size_t(base + t) * KVW;
      const float* src = ckv.data() + (row0 + size_t(t)) * KVW;
      ref::rmsnorm(src, w.kv_a_norm.data(), KVL, c.mla_latent_norm_eps, dst);
      for (int i = 0; i < ROPE; i++) dst[KVL + i] = src[KVL + i];
    }
    cache.len = base + Ts;
    score.resize(size_t(cache.len));
    for (int ts = 0; ts < Ts; ts++) {
      const int64_t n = base + ts + 1;  // causal: positions 0..base+ts
      const size_t t = row0 + size_t(ts);
      for (int h = 0; h < NH; h++) {
        const float* qh = q.data() + (size_t(t) * NH + h) * QH;
        const uint16_t* Kh = kv_b + size_t(h) * KVB * KVL;        // [NOPE][KVL]
        const uint16_t* Uh = Kh + size_t(NOPE) * KVL;                 // [VD][KVL]
        for (int j = 0; j < KVL; j++) qhat[j] = 0.0f;
        for (int i = 0; i < NOPE; i++) {
          const float qi = qh[i];
          const uint16_t* row = Kh + size_t(i) * KVL;
          for (int j = 0; j < KVL; j++) qhat[j] += bf16_at(row + j) * qi;
        }
        for (int64_t tau = 0; tau < n; tau++) {
          const float* kv = cache.kv.data() + size_t(tau) * KVW;
          float s = 0.0f;
          for (int j = 0; j < KVL; j++) s += qhat[j] * kv[j];
          for (int i = 0; i < ROPE; i++) s += qh[NOPE + i] * kv[KVL + i];
          score[size_t(tau)] = s * scale;
        }
        ref::softmax(score.data(), int(n));
        for (int j = 0; j < KVL; j++) chat[j] = 0.0f;
        for (int64_t tau = 0; tau < n; tau++) {
          const float p = score[size_t(tau)];
          const float* kv = cache.kv.data() + size_t(tau) * KVW;
          for (int j = 0; j < KVL; j++) chat[j] += p * kv[j];
        }
        float* a = att.data() + (size_t(t) * NH + h) * VD;
        fast::matvec_bf16(Uh, VD, KVL, chat.data(), a);
        const float* g = gate.data() + (size_t(t) * NH + h) * VD;
        for (int j = 0; j < VD; j++) a[j] *= ref::sigmoid(g[j]);
      }
    }
  }

  sp.matmul(w.o, att.data(), T, out);
}

}  // namespace sluice
