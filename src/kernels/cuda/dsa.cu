// kernels/cuda/dsa.cu — K3.1 Pro's indexer scores on the GPU (cuda.h:
// dsa_scores), bitwise dsa::scores_scalar (kernels/dsa.cpp): a thread owns one
// (position, head) dot product, summed over j in order, and one thread per
// position then sums the heads' w·ReLU terms in order, all with the rounding
// intrinsics (no FMA contraction). The top-k selection is the caller's.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda {
namespace {
using namespace detail;

// A block: 32 positions (the lanes) × kWarps warps, each warp a subset of the
// heads. The block's key rows are staged in shared memory first (rows padded
// by one float: lanes read one column of 32 rows, bank-conflict free); the
// per-head ReLU terms meet in shared memory for warp 0's ordered sum.
constexpr int kLanes = 32, kWarps = 8;

__global__ void __launch_bounds__(kLanes* kWarps)
    scores_kernel(int heads, int dim, int64_t base, int ld, const float* __restrict__ qi, const float* __restrict__ w,
                  const float* __restrict__ keys, float* __restrict__ score) {
  extern __shared__ float shared[];
  float* ks = shared;                          // [kLanes][dim + 1]
  float* rs = shared + size_t(kLanes) * (dim + 1);  // [heads][kLanes]
  const int t = blockIdx.y, lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int64_t n = base + t + 1, s0 = int64_t(blockIdx.x) * kLanes;
  if (s0 >= n) return;  // the whole block is past row t's positions
  const int m = n - s0 < kLanes ? int(n - s0) : kLanes;
  for (int e = threadIdx.x; e < m * dim; e += blockDim.x) {
    const int r = e / dim, j = e % dim;
    ks[size_t(r) * (dim + 1) + j] = keys[size_t(s0 + r) * dim + j];
  }
  __syncthreads();
  const float* q = qi + size_t(t) * heads * dim;
  if (lane < m)
    for (int h = warp; h < heads; h += kWarps) {
      const float* qh = q + size_t(h) * dim;  // one address a warp: broadcast
      const float* k = ks + size_t(lane) * (dim + 1);
      float d = 0.0f;
      for (int j = 0; j < dim; j++) d = __fadd_rn(d, __fmul_rn(qh[j], k[j]));
      rs[size_t(h) * kLanes + lane] = d > 0.0f ? d : 0.0f;  // NaN counts as 0, as on the host
    }
  __syncthreads();
  if (warp == 0 && lane < m) {
    const float* wt = w + size_t(t) * heads;
    float acc = 0.0f;
    for (int h = 0; h < heads; h++) acc = __fadd_rn(acc, __fmul_rn(wt[h], rs[size_t(h) * kLanes + lane]));
    score[size_t(t) * ld + size_t(s0 + lane)] = acc;
  }
}

}  // namespace

void dsa_scores(int heads, int dim, int64_t base, int T, const float* qi, const float* w, const float* keys, int ld,
                float* score, void* stream) {
  if (heads <= 0 || dim <= 0 || T <= 0) return;
  const size_t shared = (size_t(kLanes) * (dim + 1) + size_t(heads) * kLanes) * sizeof(float);
  if (shared > 48 * 1024)
    throw std::runtime_error("cuda: dsa_scores: " + std::to_string(heads) + " heads of " + std::to_string(dim) +
                             " need more shared memory than a block has");
  const dim3 grid(unsigned((base + T + kLanes - 1) / kLanes), unsigned(T));
  scores_kernel<<<grid, kLanes * kWarps, shared, as_stream(stream)>>>(heads, dim, base, ld, qi, w, keys, score);
  check_launch("dsa_scores");
}

}  // namespace sluice::cuda
