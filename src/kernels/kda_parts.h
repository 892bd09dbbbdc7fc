// kernels/kda_parts.h — one KDA position (backend.h: kda_chunk) in three
// parts, so a device entry can run the recurrence on its own state copy and
// share the rest with the scalar entry bit for bit:
//   prepare   conv + SiLU of q, k, v (advancing conv), q and k L2-normed per
//             head (q also · 1/sqrt(D)), each channel's decay exp(g), each
//             head's σ(β) — everything with a transcendental function;
//   recur     per head, (a) decay, (b) error, (c) write, (d) read: only
//             products and sums, in the order the device kernel repeats;
//   gate      the gated output norm of one head's o.
// The scalar entry is prepare, then recur and gate head by head.
#pragma once
#include "kernels/backend.h"

namespace sluice::kda {

// One position's inputs (rows of KdaRows) into qc, kc, vc [C], decay [C], b [NH],
// for heads h0..h1-1 (their channels and conv history only: heads are
// independent here, so a threaded entry splits them, same bits).
void prepare(const KdaDims& d, const KdaParams& w, float* conv, const float* q, const float* k, const float* v,
             const float* f, const float* beta, float* qc, float* kc, float* vc, float* decay, float* b, int h0,
             int h1);

// Head h's recurrence for one position (D × D state, S[i·D + j]: key i, value j):
//   S = F · decay_i (row i);  e_j = v_j − Σ_i k_i S_ij (i in order);
//   S_ij += (b·k_i)·e_j, and with o: o_j = Σ_i q_i S_ij (i in order, the updated S).
// F may be S. err is D floats of scratch. o null: the state alone.
void recur(int D, const float* F, float* S, const float* q, const float* k, const float* v, const float* decay, float b,
           float* err, float* o);

// o ← o_norm ⊙ o·rms_inv(o) ⊙ σ(z) over one head's D values.
void gate(int D, float eps, const float* o_norm, const float* z, float* o);

}  // namespace sluice::kda
