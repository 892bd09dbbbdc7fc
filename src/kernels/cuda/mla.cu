// kernels/cuda/mla.cu — MLA attention's latent-space steps on the GPU
// (cuda.h: mla_qhat, mla_scores, mla_mix), each in the scalar entry's order
// (kernels/backend.cpp: mla_attend): a thread owns one output and sums its
// terms left to right with the rounding intrinsics (no FMA contraction), so
// every value is bitwise the host loop's. The softmax between scores and mix
// (its exp) and the value products U_h ĉ are the caller's. With a selection
// (K3.1 Pro, MlaPick) row t's i-th term is cache row sel[t][i], not i.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

#include <algorithm>

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 256;

// Block (h, t): qT[t][j][h] = Σ_i K_h[i][j]·q[t][h][i], i = 0..nope-1, for
// j < kv_lora, then qT[t][kv_lora + i][h] = q_pe[i]: head-minor, so the
// scores' lanes (consecutive heads) read it coalesced.
__global__ void __launch_bounds__(kThreads) qhat_kernel(const uint16_t* __restrict__ kv_b, int nope, int v_dim,
                                                        int kv_lora, int rope, const float* __restrict__ q,
                                                        float* __restrict__ qT) {
  const int h = blockIdx.x, t = blockIdx.y, NH = gridDim.x, kvw = kv_lora + rope;
  const uint16_t* Kh = kv_b + size_t(h) * (nope + v_dim) * kv_lora;
  const float* qh = q + (size_t(t) * NH + h) * (nope + rope);
  float* out = qT + size_t(t) * kvw * NH + h;
  for (int j = threadIdx.x; j < kv_lora; j += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < nope; i++) acc = __fadd_rn(acc, __fmul_rn(bf16_lo(Kh[size_t(i) * kv_lora + j]), qh[i]));
    out[size_t(j) * NH] = acc;
  }
  for (int i = threadIdx.x; i < rope; i += blockDim.x) out[size_t(kv_lora + i) * NH] = qh[nope + i];
}

// Row t's terms: positions 0..base+t, or its selection's nsel[t] positions.
__device__ inline int64_t terms(int64_t base, int t, MlaPick pick) { return pick.sel ? pick.nsel[t] : base + t + 1; }
__device__ inline int64_t term_row(int64_t i, int t, MlaPick pick) {
  return pick.sel ? pick.sel[size_t(t) * pick.ld + size_t(i)] : i;
}

// A thread per (term τ of row t, head h), heads fastest (a warp reads one
// cache row, broadcast, and the heads' q̂ coalesced):
// score[t][h][τ] = (Σ_j q̂_j·c′_j(τ) + Σ_i q_pe_i·k_pe_i(τ)) · scale.
__global__ void __launch_bounds__(kThreads) scores_kernel(int NH, int kvw, int64_t base, int ld,
                                                          const float* __restrict__ qT,
                                                          const float* __restrict__ cache, float scale,
                                                          float* __restrict__ score, MlaPick pick) {
  const int t = blockIdx.y;
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, n = terms(base, t, pick);
  if (g >= n * NH) return;
  const int64_t tau = g / NH;
  const int h = int(g % NH);
  const float* qh = qT + size_t(t) * kvw * NH + h;
  const float* kv = cache + size_t(term_row(tau, t, pick)) * kvw;
  float s = 0.0f;
  for (int j = 0; j < kvw; j++) s = __fadd_rn(s, __fmul_rn(qh[size_t(j) * NH], kv[j]));
  score[(size_t(t) * NH + h) * size_t(ld) + size_t(tau)] = __fmul_rn(s, scale);
}

// A thread per latent column j, kMixHeads heads at once (one cache read
// serves them all): chat[t][h][j] = Σ_τ p(τ)·c′_j(τ), row t's terms in order.
// The block stages kMixTau positions of its columns (and their p) in shared
// memory, so the loads go out together and the sums' chains read only
// shared memory.
constexpr int kMixHeads = 4, kMixThreads = 128, kMixTau = 32;
__global__ void __launch_bounds__(kMixThreads) mix_kernel(int NH, int kv_lora, int rope, int64_t base, int ld,
                                                          const float* __restrict__ p,
                                                          const float* __restrict__ cache, float* __restrict__ chat,
                                                          MlaPick pick) {
  __shared__ float cs[kMixTau][kMixThreads];
  __shared__ float ps[kMixHeads][kMixTau];
  const int j = blockIdx.x * kMixThreads + threadIdx.x, h0 = blockIdx.y * kMixHeads, t = blockIdx.z;
  const int heads = min(kMixHeads, NH - h0), kvw = kv_lora + rope;
  const int64_t n = terms(base, t, pick);
  const float* pt = p + (size_t(t) * NH + h0) * size_t(ld);
  float acc[kMixHeads];
#pragma unroll
  for (int k = 0; k < kMixHeads; k++) acc[k] = 0.0f;
  for (int64_t tau0 = 0; tau0 < n; tau0 += kMixTau) {
    const int m = n - tau0 < kMixTau ? int(n - tau0) : kMixTau;
    if (j < kv_lora)
      for (int r = 0; r < m; r++) cs[r][threadIdx.x] = cache[size_t(term_row(tau0 + r, t, pick)) * kvw + j];
    for (int e = threadIdx.x; e < kMixHeads * kMixTau; e += kMixThreads) {
      const int k = e / kMixTau, r = e % kMixTau;
      ps[k][r] = k < heads && r < m ? pt[size_t(k) * ld + size_t(tau0 + r)] : 0.0f;
    }
    __syncthreads();
    for (int r = 0; r < m; r++) {
      const float c = cs[r][threadIdx.x];
#pragma unroll
      for (int k = 0; k < kMixHeads; k++) acc[k] = __fadd_rn(acc[k], __fmul_rn(ps[k][r], c));
    }
    __syncthreads();
  }
  if (j < kv_lora)
    for (int k = 0; k < heads; k++) chat[(size_t(t) * NH + h0 + k) * kv_lora + j] = acc[k];
}

int threads_for(int n) { return n < kThreads ? (n + 31) / 32 * 32 : kThreads; }

}  // namespace

void mla_qhat(const uint16_t* kv_b, int NH, int nope, int v_dim, int kv_lora, int rope, int T, const float* q,
              float* qT, void* stream) {
  if (NH <= 0 || T <= 0 || kv_lora <= 0) return;
  qhat_kernel<<<dim3(NH, T), threads_for(kv_lora), 0, as_stream(stream)>>>(kv_b, nope, v_dim, kv_lora, rope, q, qT);
  check_launch("mla_qhat");
}

// A score row's width: every position's, or the selection's.
int score_ld(int64_t base, int T, MlaPick pick) { return pick.sel ? pick.ld : int(base + T); }

void mla_scores(int NH, int kv_lora, int rope, int64_t base, int T, const float* qT, const float* cache, float scale,
                float* score, void* stream, MlaPick pick) {
  if (NH <= 0 || T <= 0) return;
  const int ld = score_ld(base, T, pick);
  const int64_t items = std::min<int64_t>(base + T, ld) * NH;  // the most terms a row has
  const dim3 grid(unsigned((items + kThreads - 1) / kThreads), unsigned(T));
  scores_kernel<<<grid, kThreads, 0, as_stream(stream)>>>(NH, kv_lora + rope, base, ld, qT, cache, scale, score, pick);
  check_launch("mla_scores");
}

void mla_mix(int NH, int kv_lora, int rope, int64_t base, int T, const float* p, const float* cache, float* chat,
             void* stream, MlaPick pick) {
  if (NH <= 0 || T <= 0 || kv_lora <= 0) return;
  const dim3 grid(unsigned((kv_lora + kMixThreads - 1) / kMixThreads), unsigned((NH + kMixHeads - 1) / kMixHeads),
                  unsigned(T));
  mix_kernel<<<grid, kMixThreads, 0, as_stream(stream)>>>(NH, kv_lora, rope, base, score_ld(base, T, pick), p, cache,
                                                          chat, pick);
  check_launch("mla_mix");
}

}  // namespace sluice::cuda
