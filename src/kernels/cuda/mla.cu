// kernels/cuda/mla.cu — MLA attention's latent-space steps on the GPU
// (cuda.h: mla_qhat, mla_scores, mla_mix), each in the scalar entry's order
// (kernels/backend.cpp: mla_attend): a thread owns one output and sums its
// terms left to right with the rounding intrinsics (no FMA contraction), so
// every value is bitwise the host loop's. The softmax between scores and mix
// (its exp) and the value products U_h ĉ are the caller's.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 256;

__device__ __forceinline__ float bf16_at(const uint16_t* p) { return __uint_as_float(uint32_t(*p) << 16); }

// Block (h, t): qhat[t][h][j] = Σ_i K_h[i][j]·q[t][h][i], i = 0..nope-1.
__global__ void __launch_bounds__(kThreads) qhat_kernel(const uint16_t* __restrict__ kv_b, int nope, int v_dim,
                                                        int kv_lora, int rope, const float* __restrict__ q,
                                                        float* __restrict__ qhat) {
  const int h = blockIdx.x, t = blockIdx.y, NH = gridDim.x;
  const uint16_t* Kh = kv_b + size_t(h) * (nope + v_dim) * kv_lora;
  const float* qh = q + (size_t(t) * NH + h) * (nope + rope);
  float* out = qhat + (size_t(t) * NH + h) * kv_lora;
  for (int j = threadIdx.x; j < kv_lora; j += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < nope; i++) acc = __fadd_rn(acc, __fmul_rn(bf16_at(Kh + size_t(i) * kv_lora + j), qh[i]));
    out[j] = acc;
  }
}

// Block (h, t), a thread per cached position τ <= base + t:
// score = (Σ_j qhat_j·c′_j(τ) + Σ_i q_pe_i·k_pe_i(τ)) · scale.
__global__ void __launch_bounds__(kThreads) scores_kernel(int nope, int kv_lora, int rope, int64_t base, int ld,
                                                          const float* __restrict__ qhat, const float* __restrict__ q,
                                                          const float* __restrict__ cache, float scale,
                                                          float* __restrict__ score) {
  extern __shared__ float qs[];  // qhat[kv_lora], then q_pe[rope]
  const int h = blockIdx.x, t = blockIdx.y, NH = gridDim.x, kvw = kv_lora + rope;
  const float* qh = qhat + (size_t(t) * NH + h) * kv_lora;
  const float* pe = q + (size_t(t) * NH + h) * (nope + rope) + nope;
  for (int j = threadIdx.x; j < kv_lora; j += blockDim.x) qs[j] = qh[j];
  for (int i = threadIdx.x; i < rope; i += blockDim.x) qs[kv_lora + i] = pe[i];
  __syncthreads();
  const int64_t n = base + t + 1;
  float* out = score + (size_t(t) * NH + h) * size_t(ld);
  for (int64_t tau = threadIdx.x; tau < n; tau += blockDim.x) {
    const float* kv = cache + size_t(tau) * kvw;
    float s = 0.0f;
    for (int j = 0; j < kvw; j++) s = __fadd_rn(s, __fmul_rn(qs[j], kv[j]));
    out[tau] = __fmul_rn(s, scale);
  }
}

// Block (h, t): chat[t][h][j] = Σ_τ p(τ)·c′_j(τ), τ = 0..base+t.
__global__ void __launch_bounds__(kThreads) mix_kernel(int kv_lora, int rope, int64_t base, int ld,
                                                       const float* __restrict__ p, const float* __restrict__ cache,
                                                       float* __restrict__ chat) {
  const int h = blockIdx.x, t = blockIdx.y, NH = gridDim.x, kvw = kv_lora + rope;
  const int64_t n = base + t + 1;
  const float* pt = p + (size_t(t) * NH + h) * size_t(ld);
  float* out = chat + (size_t(t) * NH + h) * kv_lora;
  for (int j = threadIdx.x; j < kv_lora; j += blockDim.x) {
    float acc = 0.0f;
    for (int64_t tau = 0; tau < n; tau++) acc = __fadd_rn(acc, __fmul_rn(pt[tau], cache[size_t(tau) * kvw + j]));
    out[j] = acc;
  }
}

int threads_for(int64_t n) { return n < kThreads ? int((n + 31) / 32 * 32) : kThreads; }

}  // namespace

void mla_qhat(const uint16_t* kv_b, int NH, int nope, int v_dim, int kv_lora, int rope, int T, const float* q,
              float* qhat, void* stream) {
  if (NH <= 0 || T <= 0 || kv_lora <= 0) return;
  qhat_kernel<<<dim3(NH, T), threads_for(kv_lora), 0, as_stream(stream)>>>(kv_b, nope, v_dim, kv_lora, rope, q, qhat);
  check_launch("mla_qhat");
}

void mla_scores(int NH, int nope, int kv_lora, int rope, int64_t base, int T, const float* qhat, const float* q,
                const float* cache, float scale, float* score, void* stream) {
  if (NH <= 0 || T <= 0) return;
  const size_t smem = size_t(kv_lora + rope) * sizeof(float);
  scores_kernel<<<dim3(NH, T), threads_for(base + T), smem, as_stream(stream)>>>(nope, kv_lora, rope, base,
                                                                                 int(base + T), qhat, q, cache, scale,
                                                                                 score);
  check_launch("mla_scores");
}

void mla_mix(int NH, int kv_lora, int rope, int64_t base, int T, const float* p, const float* cache, float* chat,
             void* stream) {
  if (NH <= 0 || T <= 0 || kv_lora <= 0) return;
  mix_kernel<<<dim3(NH, T), threads_for(kv_lora), 0, as_stream(stream)>>>(kv_lora, rope, base, int(base + T), p, cache,
                                                                         chat);
  check_launch("mla_mix");
}

}  // namespace sluice::cuda
