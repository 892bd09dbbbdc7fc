#include "kernels/kda_parts.h"

#include <cmath>

#include "kernels/ref.h"

namespace sluice::kda {

void prepare(const KdaDims& d, const KdaParams& w, float* conv, const float* q, const float* k, const float* v,
             const float* f, const float* beta, float* qc, float* kc, float* vc, float* decay, float* b, int h0,
             int h1) {
  const int NH = d.heads, D = d.dim, C = NH * D, K = d.conv_kernel;
  const float q_scale = 1.0f / std::sqrt(float(D));
  const size_t hist = size_t(K - 1) * C;
  const int c0 = h0 * D, c1 = h1 * D;
  ref::causal_conv_silu_step(w.q_conv, C, K, conv + 0 * hist, q, qc, c0, c1);
  ref::causal_conv_silu_step(w.k_conv, C, K, conv + 1 * hist, k, kc, c0, c1);
  ref::causal_conv_silu_step(w.v_conv, C, K, conv + 2 * hist, v, vc, c0, c1);
  for (int h = h0; h < h1; h++) {
    float* qh = qc + size_t(h) * D;
    float* kh = kc + size_t(h) * D;
    ref::l2norm(qh, D, d.eps);
    for (int i = 0; i < D; i++) qh[i] *= q_scale;
    ref::l2norm(kh, D, d.eps);
    b[h] = ref::sigmoid(beta[h]);
    const float a = w.a[size_t(h)];
    for (int i = 0; i < D; i++) {
      const size_t ci = size_t(h) * D + i;
      decay[ci] = std::exp(d.gate_lower * ref::sigmoid(a * (f[ci] + w.dt_bias[ci])));
    }
  }
}

void recur(int D, const float* F, float* S, const float* q, const float* k, const float* v, const float* decay, float b,
           float* err, float* o) {
  // (a) decay rows by the key channel's gate.
  for (int i = 0; i < D; i++) {
    float* Si = S + size_t(i) * D;
    const float* Fi = F + size_t(i) * D;
    for (int j = 0; j < D; j++) Si[j] = Fi[j] * decay[i];
  }
  // (b) prediction error against the decayed state.
  for (int j = 0; j < D; j++) err[j] = v[j];
  for (int i = 0; i < D; i++) {
    const float ki = k[i];
    const float* Si = S + size_t(i) * D;
    for (int j = 0; j < D; j++) err[j] -= ki * Si[j];
  }
  if (!o) {  // state only: (c) alone
    for (int i = 0; i < D; i++) {
      const float bk = b * k[i];
      float* Si = S + size_t(i) * D;
      for (int j = 0; j < D; j++) Si[j] += bk * err[j];
    }
    return;
  }
  // (c) rank-1 write, (d) read with the updated state.
  for (int j = 0; j < D; j++) o[j] = 0.0f;
  for (int i = 0; i < D; i++) {
    const float bk = b * k[i];
    const float qi = q[i];
    float* Si = S + size_t(i) * D;
    for (int j = 0; j < D; j++) {
      Si[j] += bk * err[j];
      o[j] += qi * Si[j];
    }
  }
}

void gate(int D, float eps, const float* o_norm, const float* z, float* o) {
  const float r = ref::rms_inv(o, D, eps);
  for (int j = 0; j < D; j++) o[j] = o_norm[size_t(j)] * (o[j] * r) * ref::sigmoid(z[j]);
}

}  // namespace sluice::kda
