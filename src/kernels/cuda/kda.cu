// kernels/cuda/kda.cu — the KDA recurrence on the GPU (cuda.h: kda_recur).
//
// A block per head, a thread per value column j (a stride when D > 128):
// every step of kda::recur touches S[i][j] for one j at a time, so a column
// evolves on its own through the chunk and needs no other thread's state.
// The position's k, q and decay (the same for the whole head) sit in shared
// memory. IEEE products and sums with the rounding intrinsics: nvcc would
// otherwise fuse them into FMAs, which the host loops never do.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
    kda_recur_kernel(int D, int T, const float* F, float* S, const float* __restrict__ q, const float* __restrict__ k,
                     const float* __restrict__ v, const float* __restrict__ decay, const float* __restrict__ b,
                     float* o) {
  extern __shared__ float sh[];  // k[D], q[D], decay[D]
  float *sk = sh, *sq = sh + D, *sd = sh + 2 * D;
  const int h = blockIdx.x, NH = gridDim.x, C = NH * D;
  const size_t head = size_t(h) * D * D;
  for (int t = 0; t < T; t++) {
    const size_t row = size_t(t) * C + size_t(h) * D;
    for (int i = threadIdx.x; i < D; i += blockDim.x) sk[i] = k[row + i], sq[i] = q[row + i], sd[i] = decay[row + i];
    __syncthreads();
    const float* Fh = (t == 0 ? F : S) + head;
    float* Sh = S + head;
    const float bt = b[size_t(t) * NH + h];
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
      // (a) decay, (b) error against the decayed state.
      float err = v[row + j];
      for (int i = 0; i < D; i++) {
        const float s = __fmul_rn(Fh[size_t(i) * D + j], sd[i]);
        Sh[size_t(i) * D + j] = s;
        err = __fsub_rn(err, __fmul_rn(sk[i], s));
      }
      // (c) rank-1 write, (d) read with the updated state.
      if (o) {
        float acc = 0.0f;
        for (int i = 0; i < D; i++) {
          const float s = __fadd_rn(Sh[size_t(i) * D + j], __fmul_rn(__fmul_rn(bt, sk[i]), err));
          Sh[size_t(i) * D + j] = s;
          acc = __fadd_rn(acc, __fmul_rn(sq[i], s));
        }
        o[row + j] = acc;
      } else {
        for (int i = 0; i < D; i++)
          Sh[size_t(i) * D + j] = __fadd_rn(Sh[size_t(i) * D + j], __fmul_rn(__fmul_rn(bt, sk[i]), err));
      }
    }
    __syncthreads();  // the next position's k, q, decay overwrite these
  }
}

}  // namespace

void kda_recur(int NH, int D, int T, const float* F, float* S, const float* q, const float* k, const float* v,
               const float* decay, const float* b, float* o, void* stream) {
  if (NH <= 0 || D <= 0 || T <= 0) return;
  const int threads = D < kThreads ? (D + 31) / 32 * 32 : kThreads;
  kda_recur_kernel<<<NH, threads, size_t(3) * D * sizeof(float), as_stream(stream)>>>(D, T, F, S, q, k, v, decay, b,
                                                                                       o);
  check_launch("kda_recur");
}

}  // namespace sluice::cuda
