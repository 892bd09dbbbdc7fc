// kernels/cuda/rows.cu — row and element-wise ops: RMSNorm rows, SiTU-GLU.
//
// rmsnorm: one block per row; thread i sums x[i], x[i+256], ... left to
// right, the block's 256 partial sums are added by a fixed tree (shared
// memory halving, then a warp butterfly), so the result depends only on the
// width. 1/sqrt and the division are IEEE (no fast math).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(const float* __restrict__ X, const float* __restrict__ w,
                                                           int width, float eps, float* Y) {
  __shared__ float part[kThreads];
  const float* x = X + size_t(blockIdx.x) * width;
  float* y = Y + size_t(blockIdx.x) * width;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < width; i += kThreads) ss = __fmaf_rn(x[i], x[i], ss);
  part[threadIdx.x] = ss;
  __syncthreads();
  for (int half = kThreads / 2; half >= 32; half >>= 1) {
    if (threadIdx.x < half) part[threadIdx.x] = __fadd_rn(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  float v = threadIdx.x < 32 ? part[threadIdx.x] : 0.0f;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  __shared__ float inv;
  if (threadIdx.x == 0) inv = 1.0f / sqrtf(v / float(width) + eps);
  __syncthreads();
  const float r = inv;
  for (int i = threadIdx.x; i < width; i += kThreads) y[i] = w[i] * (x[i] * r);
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void situ_kernel(const float* g, const float* u, int64_t n, float beta, float beta_lin, float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float gv = g[i], uv = u[i];
    const float a = (beta * tanhf(gv / beta)) * sigmoid(gv);
    const float b = beta_lin * tanhf(uv / beta_lin);
    out[i] = a * b;
  }
}

}  // namespace

void rmsnorm_rows(const float* X, const float* w, int n, int width, float eps, float* Y, void* stream) {
  if (n < 0 || width <= 0) throw std::invalid_argument("cuda: rmsnorm: bad shape");
  if (n == 0) return;
  rmsnorm_kernel<<<n, kThreads, 0, as_stream(stream)>>>(X, w, width, eps, Y);
  check_launch("rmsnorm kernel launch");
}

void situ_glu(const float* g, const float* u, int64_t n, float beta, float beta_lin, float* out, void* stream) {
  if (n <= 0) return;
  const int blocks = int(std::min<int64_t>((n + 255) / 256, int64_t(sm_count()) * 16));
  situ_kernel<<<blocks, 256, 0, as_stream(stream)>>>(g, u, n, beta, beta_lin, out);
  check_launch("situ kernel launch");
}

}  // namespace sluice::cuda
