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
#include <utility>
#include <vector>

#include "k3/layers.h"

namespace sluice {

namespace {

KdaDims kda_dims(const ModelConfig& c) {
  return {c.kda_num_heads, c.kda_head_dim, c.kda_conv_kernel, c.rms_norm_eps, c.kda_gate_lower_bound};
}

KdaParams kda_params(const KdaWeights& w, WeightOwner owner) {
  return {w.q_conv.data(), w.k_conv.data(), w.v_conv.data(), w.a.data(), w.dt_bias.data(), w.o_norm.data(), owner};
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
  const Backend& be = sp.backend();

  // Per call, not kept: the memory plan counts the largest sublayer's buffers once (working_bytes).
  std::vector<float> q(TC), k(TC), v(TC), z(TC), f(TC), fa(size_t(T) * D), beta(size_t(T) * NH), y(TC);
  sp.matmul(w.q, x, T, q.data());
  sp.matmul(w.k, x, T, k.data());
  sp.matmul(w.v, x, T, v.data());
  sp.matmul(w.g, x, T, z.data());
  sp.matmul(w.f_a, x, T, fa.data());
  sp.matmul(w.f_b, fa.data(), T, f.data());
  sp.matmul(w.b, x, T, beta.data());

  const KdaDims d = kda_dims(c);
  const KdaParams p = kda_params(w, sp.owner());
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
      undo->S_stamp = st.stamp;
    }
    const size_t row = t0 * C;
    StateStamp stamp{st.stamp};
    be.kda_chunk(d, p, from, st.S.data(), st.conv.data(), lens[seg],
                 {q.data() + row, k.data() + row, v.data() + row, f.data() + row, beta.data() + t0 * NH, z.data() + row},
                 y.data() + row, &stamp);
    st.stamp = stamp.to;
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

void kda_rollback(const Backend& be, WeightOwner owner, const ModelConfig& c, const KdaWeights& w, KdaLayerState& st,
                  KdaUndo& undo, int keep) {
  std::swap(undo.S, st.S);
  st.conv = undo.conv;
  StateStamp stamp{undo.S_stamp};
  // z is not read when only the state advances.
  be.kda_chunk(kda_dims(c), kda_params(w, owner), st.S.data(), st.S.data(), st.conv.data(), keep,
               {undo.q.data(), undo.k.data(), undo.v.data(), undo.f.data(), undo.beta.data(), nullptr}, nullptr, &stamp);
  st.stamp = stamp.to;
}

}  // namespace sluice
