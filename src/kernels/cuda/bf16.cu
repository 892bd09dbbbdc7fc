// kernels/cuda/bf16.cu — bf16 matrix-vector and matrix-matrix products.
//
// A block of 256 threads takes R rows; thread j reads 16-byte chunks (8
// columns) j, j+256, j+512, ... of each row, A chunks per row issued before
// the first is used (R·A loads in flight a thread). Decode launches (one
// token) take R = 2, A = 2: small blocks, many of them an SM, measured the
// fastest on every K3 spine shape (docs/kernels-cuda.md, "Measured");
// passes of 2-4 tokens take R = 4, A = 4 (every activation chunk serves 4
// rows). set_bf16_tuning picks another decode shape for the benchmark; R and
// A change the speed, never the bits. Tokens go through in passes of up to
// 4, the weights loaded once per pass.
//
// Reduction order (depends only on cols): thread j accumulates its chunks in
// ascending order, the 8 columns of a chunk left to right, one FMA each; a
// xor butterfly (16, 8, 4, 2, 1) adds the lanes of each warp; the 8 warp sums
// are added in warp order. Explicit __fmaf_rn/__fadd_rn: the per-(row,
// token) sequence is the same for any number of tokens per pass, so
// matmul(X)[t] is bitwise matvec(X[t]). cols % 8 != 0 takes a plain
// per-column path with the same thread/warp structure.
//
// Programmatic dependent launch (sm_90+, on unless set_pdl(false)):
// each block lets the stream's next kernel start at once, and issues its
// first weight loads before it waits for the kernel before it (the weights
// come from copies, never from a kernel; the activations are read and the
// outputs written only after the wait). So back-to-back launches overlap one
// launch's ramp with the last one's tail: a 51 MB matrix takes ~12 µs, a
// launch's ramp and tail ~3 of them. The arithmetic is unchanged.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 256, kWarps = kThreads / 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

template <int kTok, int kBlockRows, int kAhead>
__global__ void __launch_bounds__(kThreads) bf16_kernel(const uint16_t* __restrict__ W, int rows, int cols,
                                                        const float* __restrict__ X, int tok0, float* __restrict__ Y) {
  __shared__ float part[kWarps][kBlockRows][kTok];
  const int j = threadIdx.x, lane = j & 31, warp = j >> 5;
  const int r0 = blockIdx.x * kBlockRows;
  float acc[kBlockRows][kTok];
#pragma unroll
  for (int r = 0; r < kBlockRows; r++)
#pragma unroll
    for (int t = 0; t < kTok; t++) acc[r][t] = 0.0f;

  let_next_kernel_start();
  if (cols % 8 == 0) {
    const int chunks = cols / 8;
    for (int base = 0; base < chunks; base += kThreads * kAhead) {
      uint4 w[kAhead][kBlockRows];
#pragma unroll
      for (int a = 0; a < kAhead; a++) {
        const int c = base + a * kThreads + j;
#pragma unroll
        for (int r = 0; r < kBlockRows; r++)
          w[a][r] = (c < chunks && r0 + r < rows)
                        ? __ldg(reinterpret_cast<const uint4*>(W + size_t(r0 + r) * cols) + c)
                        : make_uint4(0, 0, 0, 0);
      }
      if (base == 0) wait_for_previous_kernel();  // the first weights are on their way
#pragma unroll
      for (int a = 0; a < kAhead; a++) {
        const int c = base + a * kThreads + j;
        if (c >= chunks) break;
#pragma unroll
        for (int t = 0; t < kTok; t++) {
          const float4* xp = reinterpret_cast<const float4*>(X + size_t(tok0 + t) * cols) + 2 * c;
          const float4 xa = __ldg(xp), xb = __ldg(xp + 1);
          const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
          for (int r = 0; r < kBlockRows; r++) {
            const uint32_t ws[4] = {w[a][r].x, w[a][r].y, w[a][r].z, w[a][r].w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
              acc[r][t] = __fmaf_rn(bf16_lo(ws[i]), xs[2 * i], acc[r][t]);
              acc[r][t] = __fmaf_rn(bf16_hi(ws[i]), xs[2 * i + 1], acc[r][t]);
            }
          }
        }
      }
    }
  } else {
    wait_for_previous_kernel();
    for (int c = j; c < cols; c += kThreads) {
#pragma unroll
      for (int r = 0; r < kBlockRows; r++) {
        if (r0 + r >= rows) continue;
        const float w = __uint_as_float(uint32_t(W[size_t(r0 + r) * cols + c]) << 16);
#pragma unroll
        for (int t = 0; t < kTok; t++) acc[r][t] = __fmaf_rn(w, X[size_t(tok0 + t) * cols + c], acc[r][t]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kBlockRows; r++)
#pragma unroll
    for (int t = 0; t < kTok; t++) {
      const float s = warp_sum(acc[r][t]);
      if (lane == 0) part[warp][r][t] = s;
    }
  __syncthreads();
  if (j < kBlockRows * kTok) {
    const int r = j / kTok, t = j % kTok;
    float s = part[0][r][t];
#pragma unroll
    for (int w = 1; w < kWarps; w++) s = __fadd_rn(s, part[w][r][t]);
    if (r0 + r < rows) Y[size_t(tok0 + t) * rows + r0 + r] = s;
  }
}

template <int kTok, int kBlockRows, int kAhead>
void launch_shape(const uint16_t* W, int rows, int cols, const float* X, int tok0, float* Y, cudaStream_t stream) {
  launch_pdl(bf16_kernel<kTok, kBlockRows, kAhead>, dim3((rows + kBlockRows - 1) / kBlockRows), dim3(kThreads), 0,
             stream, "bf16 kernel launch", W, rows, cols, X, tok0, Y);
}

// The decode shapes a tuning may name, the default first: both the list
// bf16_tunings() returns and the launch each one makes.
using Launcher = void (*)(const uint16_t*, int, int, const float*, int, float*, cudaStream_t);
struct DecodeShape {
  Bf16Tuning tuning;
  Launcher launch;
};
constexpr DecodeShape kDecodeShapes[] = {{{2, 2}, launch_shape<1, 2, 2>},
                                         {{4, 4}, launch_shape<1, 4, 4>},
                                         {{4, 1}, launch_shape<1, 4, 1>},
                                         {{8, 2}, launch_shape<1, 8, 2>},
                                         {{2, 4}, launch_shape<1, 2, 4>}};
const DecodeShape* g_decode = &kDecodeShapes[0];  // set_bf16_tuning

template <int kTok>
void launch(const uint16_t* W, int rows, int cols, const float* X, int tok0, float* Y, cudaStream_t stream) {
  if constexpr (kTok > 1)
    launch_shape<kTok, 4, 4>(W, rows, cols, X, tok0, Y, stream);
  else
    g_decode->launch(W, rows, cols, X, tok0, Y, stream);
}

}  // namespace

void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y, void* stream) {
  if (rows < 0 || cols <= 0 || n < 0)
    throw std::invalid_argument("cuda: bf16: bad shape " + std::to_string(rows) + "x" + std::to_string(cols));
  if (cols % 8 == 0 && (reinterpret_cast<uintptr_t>(W) % 16 != 0 || reinterpret_cast<uintptr_t>(X) % 16 != 0))
    throw std::invalid_argument("cuda: bf16: weights and activations must be 16-byte aligned");
  if (rows == 0) return;
  const cudaStream_t s = as_stream(stream);
  int t = 0;
  for (; t + 4 <= n; t += 4) launch<4>(W, rows, cols, X, t, Y, s);
  switch (n - t) {
    case 3: launch<3>(W, rows, cols, X, t, Y, s); break;
    case 2: launch<2>(W, rows, cols, X, t, Y, s); break;
    case 1: launch<1>(W, rows, cols, X, t, Y, s); break;
    default: break;
  }
}

std::vector<Bf16Tuning> bf16_tunings() {
  std::vector<Bf16Tuning> all;
  for (const DecodeShape& d : kDecodeShapes) all.push_back(d.tuning);
  return all;
}

void set_bf16_tuning(Bf16Tuning t) {
  for (const DecodeShape& d : kDecodeShapes)
    if (d.tuning.rows == t.rows && d.tuning.ahead == t.ahead) {
      g_decode = &d;
      return;
    }
  throw std::invalid_argument("cuda: no bf16 tuning of " + std::to_string(t.rows) + " rows, " + std::to_string(t.ahead) +
                              " chunks ahead");
}

Bf16Tuning bf16_tuning() { return g_decode->tuning; }

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y, void* stream) {
  matmul_bf16(W, rows, cols, x, 1, y, stream);
}

}  // namespace sluice::cuda
