// kernels/cuda/mxfp4.cu — MXFP4 matrix products (decode GEMV, grouped
// expert-major GEMM for prefill) with FP32 accumulation in a fixed order.
//
// Layout of the work. A matrix row has G = cols/32 groups of 32 columns: 16
// bytes of codes (one 128-bit load) and one E8M0 scale. A *team* of G threads
// takes a row, thread g its group g; a block holds RS teams (RS·G <= 448
// threads, 14 warps) and walks tiles of RS·R rows, each thread issuing R
// (4 or 8) independent 128-bit loads before it uses the first. The current
// matrix's activations sit in shared memory (loaded once per matrix and token
// pass), so the only memory stream is the weights; a thread reads 8 of its
// 32 at a time, which keeps it at 64 registers: two blocks (28 warps) per
// SM. Partial sums go to shared memory (two buffers, one barrier per tile)
// and warps add them. Blocks are persistent and take contiguous ranges of
// tiles, so a block changes matrix rarely.
//
// The reduction order (the exactness contract; it depends only on cols):
//   p_g = Σ_{c=0..31} d(code_c)·x_c    FMAs in column order, d = value·2^-14
//   q_g = (p_g · 2^14) · 2^(s_g-127)    two exact power-of-two multiplies
//   lane l of a warp sums q_l, q_{l+32}, q_{l+64}, ... left to right, then a
//   xor butterfly (16, 8, 4, 2, 1) adds the lanes; lane 0's sum is y.
// Every multiply by a power of two is exact (outside overflow/underflow of
// the extreme E8M0 scales, as on the CPU), so the only roundings are the FMAs
// and the adds. Explicit __fmaf_rn/__fadd_rn keep the compiler from
// contracting or reordering differently in different instantiations: the
// per-(row, token) sequence is the same for 1 or 2 tokens per pass, so
// matmul(X)[t] is bitwise matvec(X[t]).
//
// Decoding (the hard part: at 4.8 TB/s an H200 must turn ~9.6 G codes per
// millisecond into floats, ~2 instructions per code at most, while integer
// instructions issue at half the FP32 rate). Two ways, same bits:
//  - lookup: a shared-memory table maps a byte (two codes) to a float2, one
//    copy per lane (entry e, lane l at byte 256·e + 8·l: 64 KB), so a warp
//    never has a bank conflict, and one byte_perm (PRMT) builds the address —
//    the code byte as bits 8-15, the lane's 8·l as bits 0-7. Per two codes:
//    one PRMT, one LDS.64, two FFMAs.
//  - bits: a code s|e1e0m placed as fp16 bits s<<15 | e1e0m<<9 *is* the E2M1
//    value times 2^-14 (also for the subnormal 0.5), so two shifts and two
//    masks make a half2 of two codes, and the fp16->fp32 conversion is exact
//    (more integer work than the lookup: kept as the table-free fallback).
// That is why d carries the 2^-14: both ways produce identical floats.
#include <algorithm>
#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/mxfp4_launch.cuh"

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr int kMaxThreads = 448;  // RS·G: 14 warps; two blocks of 64-register threads fit an SM
constexpr int kLutFloats = 256 * 32 * 2;  // 64 KB

Mxfp4Tuning g_tuning{Mxfp4Decode::warp_auto, 4};  // the fastest measured (docs/benchmarks.md)

// Eight codes of one 32-bit word (column 8j+i is nibble i) -> d[i].
__device__ __forceinline__ void decode_bits(uint32_t w, float (&d)[8]) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    // Nibble i to bits 12-15, nibble i+4 to bits 28-31; sign stays, e1e0m moves to 9-11.
    const uint32_t a = w << (12 - 4 * i);
    const uint32_t h = (a & 0x80008000u) | ((a >> 3) & 0x0e000e00u);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    d[i] = f.x;
    d[i + 4] = f.y;
  }
}

// Activations of the current matrix (and token pass) sit in shared memory,
// group g at float offset 36·g (kXStride, mxfp4_launch.cuh); a thread reads 8 of its
// group's 32 at a time, so few registers are live and 14-warp blocks fit
// twice on an SM.

template <int kLutWords, int kTok, int kRows, bool kBf16 = false>
__global__ void __launch_bounds__(kMaxThreads) __maxnreg__(kTok == 1 ? 64 : 72)
    mxfp4_kernel(const __grid_constant__ Launch L) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  float2* lut = reinterpret_cast<float2*>(smem);
  const int G = L.cols / 32, rs = L.rs, tid = threadIdx.x;
  float* xs = smem + (kLutWords > 0 ? kLutFloats : 0);  // [kTok][G·kXStride]
  float* red0 = xs + kTok * G * kXStride;                 // 2 × [tile rows][kTok][G]

  const int slot = tid / G, g = tid % G;
  const int lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
  const int tile_rows = rs * kRows;
  const int tiles_per_task = (L.rows + tile_rows - 1) / tile_rows;

  if (kLutWords > 0) {
    // lookup: entry b, lane l at byte 256·b + 8·l (64 KB). lookup_bf16: at
    // 256·b + 4·l (the upper half of each 256-byte row is unused, so one PRMT
    // still builds the address).
    for (int i = tid; i < 256 * 32; i += blockDim.x) {
      const uint32_t b = uint32_t(i) >> 5, l = uint32_t(i) & 31u;
      if (kBf16)
        reinterpret_cast<uint32_t*>(smem)[b * 64 + l] = e2m1_bf16_pair(b);
      else
        lut[i] = e2m1_f2_pair(b);
    }
  }
  const char* lut_bytes = reinterpret_cast<const char*>(lut);
  const uint32_t lane8 = uint32_t(lane) * (kBf16 ? 4u : 8u);

  const int total = L.ntasks * tiles_per_task;
  const int begin = int(int64_t(total) * blockIdx.x / gridDim.x), end = int(int64_t(total) * (blockIdx.x + 1) / gridDim.x);
  const bool active = slot < rs;  // the last warp's spare lanes are not
  const float* my_x = xs + g * kXStride;

  int x_task = -1, x_tok = -1, buf = 0;
  int ti = begin / tiles_per_task, row0 = (begin % tiles_per_task) * tile_rows;
  for (int tile = begin; tile < end; tile++) {
    const MxTask& T = L.task[ti];
    // This thread's rows of the tile: row0 + k·rs + slot.
    uint4 w[kRows];
    uint32_t s[kRows];
#pragma unroll
    for (int k = 0; k < kRows; k++) {
      const int row = row0 + k * rs + slot;
      if (active && row < L.rows) {
        w[k] = __ldg(reinterpret_cast<const uint4*>(T.packed + size_t(row) * (L.cols / 2)) + g);
        s[k] = __ldg(T.scale + size_t(row) * G + g);
      } else {
        w[k] = make_uint4(0, 0, 0, 0), s[k] = 127;
      }
    }
    for (int tok0 = 0; tok0 < T.n; tok0 += kTok) {
      const int nt = min(kTok, T.n - tok0);
      if (ti != x_task || tok0 != x_tok) {
        // Every thread is past the last tile's arithmetic (its barrier), so
        // the activations can be replaced; the LUT is first filled here too.
        for (int i = tid; i < kTok * L.cols / 4; i += blockDim.x) {
          const int t = i / (L.cols / 4), c4 = i % (L.cols / 4);
          const float4 f = __ldg(reinterpret_cast<const float4*>(T.X + size_t(tok0 + min(t, nt - 1)) * L.cols) + c4);
          *reinterpret_cast<float4*>(xs + t * G * kXStride + (c4 / 8) * kXStride + (c4 % 8) * 4) = f;
        }
        x_task = ti, x_tok = tok0;
        __syncthreads();
      }
      float* red = red0 + buf * (tile_rows * kTok * G);
      if (active) {
        float p[kRows][kTok];
#pragma unroll
        for (int k = 0; k < kRows; k++)
#pragma unroll
          for (int t = 0; t < kTok; t++) p[k][t] = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          float x[kTok][8];
#pragma unroll
          for (int t = 0; t < kTok; t++) {
            const float4 a = *reinterpret_cast<const float4*>(my_x + t * G * kXStride + 8 * j);
            const float4 b = *reinterpret_cast<const float4*>(my_x + t * G * kXStride + 8 * j + 4);
            x[t][0] = a.x, x[t][1] = a.y, x[t][2] = a.z, x[t][3] = a.w;
            x[t][4] = b.x, x[t][5] = b.y, x[t][6] = b.z, x[t][7] = b.w;
          }
#pragma unroll
          for (int k = 0; k < kRows; k++) {
            const uint32_t word = j == 0 ? w[k].x : j == 1 ? w[k].y : j == 2 ? w[k].z : w[k].w;
            float d[8];
            if (j < kLutWords) {
              lut_decode<!kBf16>(lut_bytes, word, lane8, d);
            } else {
              decode_bits(word, d);
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
              for (int t = 0; t < kTok; t++) p[k][t] = __fmaf_rn(d[i], x[t][i], p[k][t]);
          }
        }
#pragma unroll
        for (int k = 0; k < kRows; k++) {
          const float scale = e8m0(s[k]);
#pragma unroll
          for (int t = 0; t < kTok; t++)
            red[((k * rs + slot) * kTok + t) * G + g] = __fmul_rn(__fmul_rn(p[k][t], 16384.0f), scale);
        }
      }
      // One barrier per pass: the partial sums alternate between two
      // buffers, and a buffer is written again only after the next barrier,
      // which every reader of it has passed.
      __syncthreads();
      for (int rr = warp; rr < tile_rows * kTok; rr += nwarps) {
        const int lr = rr / kTok, t = rr % kTok, row = row0 + lr;
        const float* q = red + size_t(rr) * G;
        float sum = 0.0f;
        for (int i = lane; i < G; i += 32) sum = __fadd_rn(sum, q[i]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, off));
        if (lane == 0 && row < L.rows && t < nt) T.Y[size_t(tok0 + t) * L.rows + row] = sum;
      }
      buf ^= 1;
    }
    row0 += tile_rows;
    if (row0 >= L.rows) row0 = 0, ti++;
  }
}

// ---- lookup_async: decode (one token per task) with the weights staged
// through shared memory by cp.async. The kernel above holds a tile's weights
// in registers, so a warp waits a full memory round trip every tile and the
// block's barrier keeps its warps in step; here each thread copies its own
// 16-byte words kStages-1 tiles ahead into a shared-memory ring (no registers
// held, no barrier needed for them: a thread reads only what it copied), so
// the memory stream never stops. One block per SM (the 64 KB table once),
// 896/640/320 threads for 2/4/8 rows per thread. The scales of a tile travel
// as one contiguous chunk and are applied by the reducing warps after the
// tile's barrier; the FMAs, the two power-of-two multiplies and the sums are
// the same operations in the same order as above, so the bits are the same.
// Measured slower than the register kernel on the H200 (0.37 vs 0.39 of HBM,
// docs/kernels-cuda.md): the limit is the decode's shared-memory pipe, not memory
// latency. Kept selectable as the base for a cheaper decode.
// Threads per block by rows per thread: more rows per thread, fewer threads
// (the ring holds rows × threads words per stage).
constexpr int pipe_threads(int rows_per_thread) { return rows_per_thread == 2 ? 896 : rows_per_thread == 4 ? 640 : 320; }
constexpr int kScaleRing = 5;  // kStages + 1 (a chunk is overwritten only after its readers' next barrier)

__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  const uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

template <int kRows, int kStages>
__global__ void __launch_bounds__(pipe_threads(kRows), 1)
    mxfp4_async_kernel(const __grid_constant__ Launch L) {
  static_assert(kStages + 1 <= kScaleRing, "scale ring too small");
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int G = L.cols / 32, rs = L.rs, tid = threadIdx.x, nthreads = blockDim.x;
  const int tile_rows = rs * kRows;
  float2* lut = reinterpret_cast<float2*>(smem);
  uint4* ring = reinterpret_cast<uint4*>(smem + kLutFloats);           // [kStages][kRows][nthreads]
  float* xs = reinterpret_cast<float*>(ring + size_t(kStages) * kRows * nthreads);  // [G·kXStride]
  float* red0 = xs + G * kXStride;                                       // 2 × [tile rows][G]
  uint8_t* sc0 = reinterpret_cast<uint8_t*>(red0 + 2 * tile_rows * G);  // kScaleRing × [tile rows·G rounded to 16]
  const int sc_stride = (tile_rows * G + 15) / 16 * 16;

  const int slot = tid / G, g = tid % G;
  const int lane = tid & 31, warp = tid >> 5, nwarps = nthreads >> 5;
  const int tiles_per_task = (L.rows + tile_rows - 1) / tile_rows;
  const bool active = slot < rs;

  for (int i = tid; i < 256 * 32; i += nthreads) {
    const uint32_t b = uint32_t(i) >> 5;
    lut[i] = e2m1_f2_pair(b);
  }
  const char* lut_bytes = reinterpret_cast<const char*>(lut);
  const uint32_t lane8 = uint32_t(lane) * 8u;

  const int total = L.ntasks * tiles_per_task;
  const int begin = int(int64_t(total) * blockIdx.x / gridDim.x), end = int(int64_t(total) * (blockIdx.x + 1) / gridDim.x);
  const float* my_x = xs + g * kXStride;

  // The copy cursor runs kStages-1 tiles ahead of the compute cursor.
  int f_tile = begin, f_ti = begin / tiles_per_task, f_row0 = (begin % tiles_per_task) * tile_rows;
  auto issue = [&]() {
    if (f_tile < end) {
      const MxTask& T = L.task[f_ti];
      uint4* dst = ring + size_t(f_tile % kStages) * kRows * nthreads + tid;
#pragma unroll
      for (int k = 0; k < kRows; k++) {
        const int row = f_row0 + k * rs + slot;
        const bool ok = active && row < L.rows;
        const uint8_t* src = ok ? T.packed + size_t(row) * (L.cols / 2) + 16 * size_t(g) : T.packed;
        cp_async16(dst + k * nthreads, src, ok ? 16 : 0);
      }
      const int chunk = min(tile_rows, L.rows - f_row0) * G;  // contiguous scale bytes of the tile
      if (16 * tid < chunk) {
        const int nb = min(16, chunk - 16 * tid);
        cp_async16(sc0 + (f_tile % kScaleRing) * sc_stride + 16 * tid, T.scale + size_t(f_row0) * G + 16 * tid, nb);
      }
      f_row0 += tile_rows;
      if (f_row0 >= L.rows) f_row0 = 0, f_ti++;
    }
    f_tile++;
    cp_async_commit();  // empty groups too: the count of pending groups stays uniform
  };
#pragma unroll 1
  for (int i = 0; i < kStages - 1; i++) issue();

  int x_task = -1, buf = 0;
  int ti = begin / tiles_per_task, row0 = (begin % tiles_per_task) * tile_rows;
#pragma unroll 1
  for (int tile = begin; tile < end; tile++) {
    issue();
    cp_async_wait<kStages - 1>();  // this thread's words of `tile` have landed
    const MxTask& T = L.task[ti];
    if (ti != x_task) {
      // Every thread is past the last tile's arithmetic (its barrier), so the
      // activations can be replaced; the table is first filled here too.
      for (int i = tid; i < L.cols / 4; i += nthreads) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(T.X) + i);
        *reinterpret_cast<float4*>(xs + (i / 8) * kXStride + (i % 8) * 4) = f;
      }
      x_task = ti;
      __syncthreads();
    }
    float* red = red0 + buf * (tile_rows * G);
    if (active) {
      const uint4* src = ring + size_t(tile % kStages) * kRows * nthreads + tid;
      uint4 w[kRows];
#pragma unroll
      for (int k = 0; k < kRows; k++) w[k] = src[k * nthreads];
      float p[kRows];
#pragma unroll
      for (int k = 0; k < kRows; k++) p[k] = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; j++) {
        float x[8];
        const float4 a = *reinterpret_cast<const float4*>(my_x + 8 * j);
        const float4 b = *reinterpret_cast<const float4*>(my_x + 8 * j + 4);
        x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
#pragma unroll
        for (int k = 0; k < kRows; k++) {
          const uint32_t word = j == 0 ? w[k].x : j == 1 ? w[k].y : j == 2 ? w[k].z : w[k].w;
          float d[8];
          lut_decode<true>(lut_bytes, word, lane8, d);
#pragma unroll
          for (int i = 0; i < 8; i++) p[k] = __fmaf_rn(d[i], x[i], p[k]);
        }
      }
#pragma unroll
      for (int k = 0; k < kRows; k++) red[(k * rs + slot) * G + g] = p[k];
    }
    // Every thread has waited for its own copies of this tile (the scale
    // chunk included) before this barrier, so the reducers may read them.
    __syncthreads();
    const uint8_t* sc = sc0 + (tile % kScaleRing) * sc_stride;
    for (int lr = warp; lr < tile_rows; lr += nwarps) {
      const int row = row0 + lr;
      const float* q = red + size_t(lr) * G;
      const uint8_t* s = sc + size_t(lr) * G;
      float sum = 0.0f;
      for (int i = lane; i < G; i += 32) sum = __fadd_rn(sum, __fmul_rn(__fmul_rn(q[i], 16384.0f), e8m0(s[i])));
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, off));
      if (lane == 0 && row < L.rows) T.Y[row] = sum;
    }
    buf ^= 1;
    row0 += tile_rows;
    if (row0 >= L.rows) row0 = 0, ti++;
  }
  cp_async_wait<0>();
}

// Shared memory of the async kernel with kStages stages, or 0 if G is too wide for one team per block.
size_t async_smem(int G, int rs, int rows_per_thread, int stages) {
  const int threads = (rs * G + 31) / 32 * 32, tile_rows = rs * rows_per_thread;
  return sizeof(float) * (kLutFloats + size_t(G) * kXStride + 2 * size_t(tile_rows) * G) +
         16 * size_t(stages) * rows_per_thread * threads + kScaleRing * size_t((tile_rows * G + 15) / 16 * 16);
}

template <int kRows, int kStages>
void launch_async(const Launch& L, size_t smem, cudaStream_t stream) {
  const int G = L.cols / 32, threads = (L.rs * G + 31) / 32 * 32;
  static thread_local Occupancy occ;
  launch_persistent(mxfp4_async_kernel<kRows, kStages>, occ, L, L.rs * kRows, threads, smem, stream,
                    "mxfp4 async kernel launch");
}

// Runs the async kernel if this launch suits it (decode, aligned scales, the
// ring fits shared memory); false otherwise.
bool try_async(Launch L, cudaStream_t stream) {
  const int G = L.cols / 32, rpt = g_tuning.rows_per_thread;
  L.rs = std::max(1, pipe_threads(rpt) / G);
  for (int i = 0; i < L.ntasks; i++)
    if (reinterpret_cast<uintptr_t>(L.task[i].scale) % 16 != 0 || (size_t(L.rs) * rpt * G) % 16 != 0) return false;
  int max_smem = 0, dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "smem attribute");
  for (int stages : {4, 3, 2}) {
    const size_t smem = async_smem(G, L.rs, rpt, stages);
    if (smem > size_t(max_smem)) continue;
    if (rpt == 2) {
      if (stages == 4) launch_async<2, 4>(L, smem, stream);
      else if (stages == 3) launch_async<2, 3>(L, smem, stream);
      else launch_async<2, 2>(L, smem, stream);
    } else if (rpt == 8) {
      if (stages == 4) launch_async<8, 4>(L, smem, stream);
      else if (stages == 3) launch_async<8, 3>(L, smem, stream);
      else launch_async<8, 2>(L, smem, stream);
    } else {
      if (stages == 4) launch_async<4, 4>(L, smem, stream);
      else if (stages == 3) launch_async<4, 3>(L, smem, stream);
      else launch_async<4, 2>(L, smem, stream);
    }
    return true;
  }
  return false;
}

template <int kLutWords, int kTok, int kRows, bool kBf16 = false>
void launch_variant(const Launch& L, cudaStream_t stream) {
  const int G = L.cols / 32, threads = (L.rs * G + 31) / 32 * 32;  // whole warps: the reduction shuffles
  const size_t smem = sizeof(float) * ((kLutWords > 0 ? kLutFloats : 0) + size_t(kTok) * G * kXStride +
                                       2 * size_t(L.rs) * kRows * kTok * G);
  static thread_local Occupancy occ;
  launch_persistent(mxfp4_kernel<kLutWords, kTok, kRows, kBf16>, occ, L, L.rs * kRows, threads, smem, stream,
                    "mxfp4 kernel launch");
}

template <int kTok, int kRows>
void launch_rows(const Launch& L, cudaStream_t stream) {
  switch (g_tuning.decode) {
    case Mxfp4Decode::lookup: return launch_variant<4, kTok, kRows>(L, stream);
    case Mxfp4Decode::bits: return launch_variant<0, kTok, kRows>(L, stream);
    case Mxfp4Decode::lookup_async: return launch_variant<4, kTok, kRows>(L, stream);
    case Mxfp4Decode::lookup_bf16:
    case Mxfp4Decode::warp:
    case Mxfp4Decode::warp3:
    case Mxfp4Decode::warp1:
    case Mxfp4Decode::warp_f2:
    case Mxfp4Decode::warp_mix1:
    case Mxfp4Decode::warp_auto:
    case Mxfp4Decode::mma:
    case Mxfp4Decode::mma3: return launch_variant<4, kTok, kRows, true>(L, stream);
  }
}

template <int kTok>
void launch_tok(const Launch& L, cudaStream_t stream) {
  if (is_mma(g_tuning.decode)) {
    if (launch_mma(L, kTok, g_tuning, stream)) return;
    // A width the tensor-core kernel does not take: the default's kernels (their family's bits).
    if (kTok == 1 && launch_warp(L, {Mxfp4Decode::warp_auto, 4}, stream)) return;
    return launch_variant<4, kTok, 4, true>(L, stream);
  }
  if (g_tuning.decode == Mxfp4Decode::warp || g_tuning.decode == Mxfp4Decode::warp3 ||
      g_tuning.decode == Mxfp4Decode::warp1 || g_tuning.decode == Mxfp4Decode::warp_f2 ||
      g_tuning.decode == Mxfp4Decode::warp_mix1 || g_tuning.decode == Mxfp4Decode::warp_auto) {
    if (kTok == 1 && launch_warp(L, g_tuning, stream)) return;
    return launch_rows<kTok, 4>(L, stream);  // prefill: same bits
  }
  if (g_tuning.decode == Mxfp4Decode::lookup_async) {
    if (kTok == 1 && try_async(L, stream)) return;
    return launch_rows<kTok, 4>(L, stream);  // prefill, or a shape it does not take: same bits
  }
  if (g_tuning.rows_per_thread == 8) return launch_rows<kTok, 8>(L, stream);
  launch_rows<kTok, 4>(L, stream);
}

}  // namespace

namespace detail {
Mxfp4Launch g_last{};
}

const std::vector<Mxfp4Tuning>& mxfp4_tunings() {
  static const std::vector<Mxfp4Tuning> all = {
      {Mxfp4Decode::lookup, 4},       {Mxfp4Decode::lookup, 8},       {Mxfp4Decode::bits, 4},
      {Mxfp4Decode::bits, 8},         {Mxfp4Decode::lookup_async, 2}, {Mxfp4Decode::lookup_async, 4},
      {Mxfp4Decode::lookup_async, 8}, {Mxfp4Decode::lookup_bf16, 4},  {Mxfp4Decode::lookup_bf16, 8},
      {Mxfp4Decode::warp, 2},         {Mxfp4Decode::warp, 4},         {Mxfp4Decode::warp3, 2},
      {Mxfp4Decode::warp3, 4},        {Mxfp4Decode::warp1, 4},        {Mxfp4Decode::warp_f2, 4},
      {Mxfp4Decode::warp_mix1, 2},    {Mxfp4Decode::warp_mix1, 4},    {Mxfp4Decode::warp_auto, 4},
      {Mxfp4Decode::mma, 1},          {Mxfp4Decode::mma, 2},          {Mxfp4Decode::mma3, 1}};
  return all;
}

void set_mxfp4_tuning(Mxfp4Tuning t) {
  for (const Mxfp4Tuning& v : mxfp4_tunings())
    if (v.decode == t.decode && v.rows_per_thread == t.rows_per_thread) {
      g_tuning = t;
      return;
    }
  throw std::invalid_argument(
      "cuda: mxfp4: rows_per_thread must be 4 or 8 (lookup_async also 2; the warp kernels 2 or 4; mma 1 or 2; mma3 1)");
}
Mxfp4Tuning mxfp4_tuning() { return g_tuning; }
int mxfp4_family(Mxfp4Tuning t, int cols) {
  return is_mma(t.decode) && mma_takes(cols) ? 1 : 0;
}
Mxfp4Launch mxfp4_last_launch() { return g_last; }
const char* mxfp4_decode_name(Mxfp4Decode d) {
  switch (d) {
    case Mxfp4Decode::lookup: return "lookup";
    case Mxfp4Decode::bits: return "bits";
    case Mxfp4Decode::lookup_async: return "lookup_async";
    case Mxfp4Decode::lookup_bf16: return "lookup_bf16";
    case Mxfp4Decode::warp: return "warp";
    case Mxfp4Decode::warp3: return "warp3";
    case Mxfp4Decode::warp1: return "warp1";
    case Mxfp4Decode::warp_f2: return "warp_f2";
    case Mxfp4Decode::warp_mix1: return "warp_mix1";
    case Mxfp4Decode::warp_auto: return "warp_auto";
    case Mxfp4Decode::mma: return "mma";
    case Mxfp4Decode::mma3: return "mma3";
  }
  return "?";
}

void grouped_mxfp4(const MxTask* tasks, int ntasks, int rows, int cols, void* stream) {
  for_each_launch(tasks, ntasks, rows, cols, [&](Launch& L, int max_n) {
    L.rs = std::max(1, kMaxThreads / (cols / 32));
    // Two tokens per pass when any task has several (prefill); the order per
    // (row, token) is the same either way.
    if (max_n > 1)
      launch_tok<2>(L, as_stream(stream));
    else
      launch_tok<1>(L, as_stream(stream));
  });
}

void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* x, float* y,
                  void* stream) {
  const MxTask t{packed, scale, x, y, 1};
  grouped_mxfp4(&t, 1, rows, cols, stream);
}

void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* X, int n,
                  float* Y, void* stream) {
  const MxTask t{packed, scale, X, Y, n};
  grouped_mxfp4(&t, 1, rows, cols, stream);
}

}  // namespace sluice::cuda
