// KDA — Kimi Delta Attention (spec §3.3). Per head h, with key/value width D:
//   decay   S ← Diag(exp(g)) · S              (row i by its key channel's gate)
//   error   e = v − Sᵀk                       (against the decayed S)
//   write   S ← S + β · k eᵀ
//   read    o = Sᵀq                           (the updated S)
// then a per-head RMSNorm of o gated by σ(g_proj x), and o_proj. Projections
// are batched over the chunk; conv and recurrence run token by token.
//
// Rollback (KdaUndo, k3/state.h): a chunk with an undo record writes its first
// position's decayed state into a second buffer instead of over S, so the
// state before the chunk survives without a copy; cutting the chunk back to
// `keep` positions swaps that buffer back and replays the recurrence (conv and
// S only, from the kept projections) for the kept positions: the same
// operations in the same order, so the state is bitwise what a chunk of
// `keep` tokens leaves.
#include <cmath>
#include <utility>
#include <vector>

#include "k3/layers.h"
#include "kernels/fast.h"
#include "kernels/ref.h"

namespace sluice {

namespace {

struct Scratch {
  std::vector<float> qc, kc, vc, err;
  explicit Scratch(int C, int D) : qc(size_t(C)), kc(size_t(C)), vc(size_t(C)), err(size_t(D)) {}
};

// One position: conv, norms, the recurrence per head. The decay reads the
// state from `from` (st.S itself, or the pre-chunk buffer) and writes st.S.
// Row `q`..`beta` are this position's projections; with o_row null (a replay
// wants only the state) neither the read nor the gated output norm is computed.
void kda_position(const ModelConfig& c, const KdaWeights& w, KdaLayerState& st, const float* from, const float* q,
                  const float* k, const float* v, const float* f, const float* beta, const float* z, Scratch& s,
                  float* o_row) {
  const int NH = c.kda_num_heads, D = c.kda_head_dim, C = NH * D, K = c.kda_conv_kernel;
  const float eps = c.rms_norm_eps, lower = c.kda_gate_lower_bound;
  const float q_scale = 1.0f / std::sqrt(float(D));
  const size_t hist = size_t(K - 1) * C;
  ref::causal_conv_silu_step(w.q_conv.data(), C, K, st.conv.data() + 0 * hist, q, s.qc.data());
  ref::causal_conv_silu_step(w.k_conv.data(), C, K, st.conv.data() + 1 * hist, k, s.kc.data());
  ref::causal_conv_silu_step(w.v_conv.data(), C, K, st.conv.data() + 2 * hist, v, s.vc.data());
  float* err = s.err.data();
  for (int h = 0; h < NH; h++) {
    float* qh = s.qc.data() + size_t(h) * D;
    float* kh = s.kc.data() + size_t(h) * D;
    const float* vh = s.vc.data() + size_t(h) * D;
    ref::l2norm(qh, D, eps);
    for (int i = 0; i < D; i++) qh[i] *= q_scale;
    ref::l2norm(kh, D, eps);
    const float b = ref::sigmoid(beta[h]);
    const float a = w.a[size_t(h)];
    float* S = st.S.data() + size_t(h) * D * D;  // S[i * D + j]: key i, value j
    const float* F = from + size_t(h) * D * D;
    // (a) decay rows by the key channel's gate.
    for (int i = 0; i < D; i++) {
      const size_t ci = size_t(h) * D + i;
      const float g = lower * ref::sigmoid(a * (f[ci] + w.dt_bias[ci]));
      const float decay = std::exp(g);
      float* Si = S + size_t(i) * D;
      const float* Fi = F + size_t(i) * D;
      for (int j = 0; j < D; j++) Si[j] = Fi[j] * decay;
    }
    // (b) prediction error against the decayed state.
    for (int j = 0; j < D; j++) err[j] = vh[j];
    for (int i = 0; i < D; i++) {
      const float ki = kh[i];
      const float* Si = S + size_t(i) * D;
      for (int j = 0; j < D; j++) err[j] -= ki * Si[j];
    }
    if (!o_row) {  // a replay: (c) alone
      for (int i = 0; i < D; i++) {
        const float bk = b * kh[i];
        float* Si = S + size_t(i) * D;
        for (int j = 0; j < D; j++) Si[j] += bk * err[j];
      }
      continue;
    }
    // (c) rank-1 write, (d) read with the updated state.
    float* o = o_row + size_t(h) * D;
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
    const float* zh = z + size_t(h) * D;
    for (int j = 0; j < D; j++) o[j] = w.o_norm[size_t(j)] * (o[j] * r) * ref::sigmoid(zh[j]);
  }
}

}  // namespace

void kda_forward(const ModelConfig& c, Spine& sp, const KdaWeights& w, KdaLayerState& st, const float* x, int T, float* out,
                 KdaUndo* undo) {
  KdaLayerState* one[1] = {&st};
  KdaUndo* undos[1] = {undo};
  const int lens[1] = {T};
  kda_forward_rows(c, sp, w, one, lens, undos, x, out);
}

void kda_forward_rows(const ModelConfig& c, Spine& sp, const KdaWeights& w, std::span<KdaLayerState* const> states,
                      std::span<const int> lens, std::span<KdaUndo* const> undos, const float* x, float* out) {
  const int NH = c.kda_num_heads, D = c.kda_head_dim, C = NH * D;
  int T = 0;
  for (int n : lens) T += n;
  const size_t TC = size_t(T) * C;

  std::vector<float> q(TC), k(TC), v(TC), z(TC), f(TC), fa(size_t(T) * D), beta(size_t(T) * NH);
  sp.matmul(w.q, x, T, q.data());
  sp.matmul(w.k, x, T, k.data());
  sp.matmul(w.v, x, T, v.data());
  sp.matmul(w.g, x, T, z.data());
  sp.matmul(w.f_a, x, T, fa.data());
  sp.matmul(w.f_b, fa.data(), T, f.data());
  sp.matmul(w.b, x, T, beta.data());

  Scratch s(C, D);
  std::vector<float> y(TC);
  // Each sequence's rows through its own state, in order; t0 is the segment's first row.
  for (size_t seg = 0, t0 = 0; seg < states.size(); t0 += size_t(lens[seg]), seg++) {
    KdaLayerState& st = *states[seg];
    KdaUndo* undo = undos[seg];
    const float* from = st.S.data();
    if (undo) {
      // Keep the pre-chunk state: the first position decays it into the other buffer.
      undo->S.resize(st.S.size());
      std::swap(undo->S, st.S);
      from = undo->S.data();
      undo->conv = st.conv;
    }
    for (size_t t = t0; t < t0 + size_t(lens[seg]); t++) {
      const size_t row = t * C;
      kda_position(c, w, st, from, q.data() + row, k.data() + row, v.data() + row, f.data() + row,
                   beta.data() + t * NH, z.data() + row, s, y.data() + row);
      from = st.S.data();
    }
    if (undo) {
      const size_t r0 = t0 * C, r1 = (t0 + size_t(lens[seg])) * C;
      undo->q.assign(q.begin() + ptrdiff_t(r0), q.begin() + ptrdiff_t(r1));
      undo->k.assign(k.begin() + ptrdiff_t(r0), k.begin() + ptrdiff_t(r1));
      undo->v.assign(v.begin() + ptrdiff_t(r0), v.begin() + ptrdiff_t(r1));
      undo->f.assign(f.begin() + ptrdiff_t(r0), f.begin() + ptrdiff_t(r1));
      undo->beta.assign(beta.begin() + ptrdiff_t(t0 * NH), beta.begin() + ptrdiff_t((t0 + size_t(lens[seg])) * NH));
    }
  }
  sp.matmul(w.o, y.data(), T, out);
}

void kda_rollback(const ModelConfig& c, const KdaWeights& w, KdaLayerState& st, KdaUndo& undo, int keep) {
  const int NH = c.kda_num_heads, D = c.kda_head_dim, C = NH * D;
  std::swap(undo.S, st.S);
  st.conv = undo.conv;
  Scratch s(C, D);
  for (int t = 0; t < keep; t++) {
    const size_t row = size_t(t) * C;
    kda_position(c, w, st, st.S.data(), undo.q.data() + row, undo.k.data() + row, undo.v.data() + row,
                 undo.f.data() + row, undo.beta.data() + size_t(t) * NH, nullptr, s, nullptr);
  }
}

}  // namespace sluice
