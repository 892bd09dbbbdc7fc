// KDA — Kimi Delta Attention (spec §3.3). Per head h, with key/value width D:
//   decay   S ← Diag(exp(g)) · S              (row i by its key channel's gate)
//   error   e = v − Sᵀk                       (against the decayed S)
//   write   S ← S + β · k eᵀ
//   read    o = Sᵀq                           (the updated S)
// then a per-head RMSNorm of o gated by σ(g_proj x), and o_proj. Projections
// are batched over the chunk; conv and recurrence run token by token.
#include <cmath>
#include <vector>

#include "k3/layers.h"
#include "kernels/fast.h"
#include "kernels/ref.h"

namespace sluice {

void kda_forward(const ModelConfig& c, Spine& sp, const KdaWeights& w, KdaLayerState& st, const float* x, int T, float* out) {
  const int NH = c.kda_num_heads, D = c.kda_head_dim, C = NH * D, K = c.kda_conv_kernel;
  const float eps = c.rms_norm_eps, lower = c.kda_gate_lower_bound;
  const float q_scale = 1.0f / std::sqrt(float(D));
  const size_t TC = size_t(T) * C;

  std::vector<float> q(TC), k(TC), v(TC), z(TC), f(TC), fa(size_t(T) * D), beta(size_t(T) * NH);
  sp.matmul(w.q, x, T, q.data());
  sp.matmul(w.k, x, T, k.data());
  sp.matmul(w.v, x, T, v.data());
  sp.matmul(w.g, x, T, z.data());
  sp.matmul(w.f_a, x, T, fa.data());
  sp.matmul(w.f_b, fa.data(), T, f.data());
  sp.matmul(w.b, x, T, beta.data());

  const size_t hist = size_t(K - 1) * C;
  std::vector<float> qc(C), kc(C), vc(C), y(TC), err_buf(static_cast<size_t>(D));
  float* err = err_buf.data();
  for (int t = 0; t < T; t++) {
    const size_t row = size_t(t) * C;
    ref::causal_conv_silu_step(w.q_conv.data(), C, K, st.conv.data() + 0 * hist, q.data() + row, qc.data());
    ref::causal_conv_silu_step(w.k_conv.data(), C, K, st.conv.data() + 1 * hist, k.data() + row, kc.data());
    ref::causal_conv_silu_step(w.v_conv.data(), C, K, st.conv.data() + 2 * hist, v.data() + row, vc.data());
    for (int h = 0; h < NH; h++) {
      float* qh = qc.data() + size_t(h) * D;
      float* kh = kc.data() + size_t(h) * D;
      const float* vh = vc.data() + size_t(h) * D;
      ref::l2norm(qh, D, eps);
      for (int i = 0; i < D; i++) qh[i] *= q_scale;
      ref::l2norm(kh, D, eps);
      const float b = ref::sigmoid(beta[size_t(t) * NH + h]);
      const float a = w.a[size_t(h)];
      float* S = st.S.data() + size_t(h) * D * D;  // S[i * D + j]: key i, value j
      // (a) decay rows by the key channel's gate.
      for (int i = 0; i < D; i++) {
        const size_t ci = row + size_t(h) * D + i;
        const float g = lower * ref::sigmoid(a * (f[ci] + w.dt_bias[size_t(h) * D + i]));
        const float decay = std::exp(g);
        float* Si = S + size_t(i) * D;
        for (int j = 0; j < D; j++) Si[j] *= decay;
      }
      // (b) prediction error against the decayed state.
      for (int j = 0; j < D; j++) err[j] = vh[j];
      for (int i = 0; i < D; i++) {
        const float ki = kh[i];
        const float* Si = S + size_t(i) * D;
        for (int j = 0; j < D; j++) err[j] -= ki * Si[j];
      }
      // (c) rank-1 write, (d) read with the updated state.
      float* o = y.data() + row + size_t(h) * D;
      for (int j = 0; j < D; j++) o[j] = 0.0f;
      for (int i = 0; i < D; i++) {
        const float bk = b * kh[i];
        const float qi = qh[i];
        float* Si = S + size_t(i) * D;
        for (int j = 0; j < D; j++) {
          Si[j] += bk * err[j];
          o[j] += qi * Si[j];
        }
      }
      // Gated output norm: o_norm ⊙ o · rms(o) ⊙ σ(z).
      const float r = ref::rms_inv(o, D, eps);
      const float* zh = z.data() + row + size_t(h) * D;
      for (int j = 0; j < D; j++) o[j] = w.o_norm[size_t(j)] * (o[j] * r) * ref::sigmoid(zh[j]);
    }
  }
  sp.matmul(w.o, y.data(), T, out);
}

}  // namespace sluice
