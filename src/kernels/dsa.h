// kernels/dsa.h — K3.1 Pro's lightning indexer (docs/k31-spec.md §3.1-3.2):
// the score row of one query and the top-k selection, as the backend's
// dsa_select op runs them. Every function here gives the same bits (the SIMD
// bodies vectorize across key positions, each lane doing the scalar loop's
// operations in its order, with no fused multiply-add).
#pragma once
#include <cstdint>

namespace sluice::dsa {

// score[s] for s < n, one query against keys [n][dim]:
//   d_h = Σ_{j<dim} qi[h·dim + j]·keys[s·dim + j]   (j ascending)
//   score[s] = Σ_{h<heads} w[h]·max(d_h, 0)          (h ascending, from 0)
// w is already scaled by 1/sqrt(heads·dim). A NaN d_h counts as 0.
void scores_scalar(const float* qi, const float* w, const float* keys, int heads, int dim, int64_t n, float* score);
// The same bits, eight positions per AVX2 register / sixteen per AVX-512 one
// (call only on a CPU that has them; fast_* files' flags).
void scores_avx2(const float* qi, const float* w, const float* keys, int heads, int dim, int64_t n, float* score);
void scores_avx512(const float* qi, const float* w, const float* keys, int heads, int dim, int64_t n, float* score);

// The top-k of n scores by (score descending, position ascending), NaN below
// every number, +0 == −0; written to sel[0..min(k, n)) in ascending position.
// Returns min(k, n). `order` is scratch for n ints.
int select_topk(const float* score, int64_t n, int k, int* order, int* sel);

}  // namespace sluice::dsa
