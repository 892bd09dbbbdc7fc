// kernels/cuda/mxfp4_launch.cuh — what the MXFP4 kernels (mxfp4.cu, the
// team kernels; mxfp4_warp.cu, the warp kernel for decode) share: the launch
// parameter block, the shape limits, the exact E2M1 value and the table
// layouts. The reduction order they all follow is in mxfp4.cu's header.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda::detail {

constexpr int kMaxCols = 7168;  // activations, table and partial sums fit shared memory
constexpr int kMaxTasks = 64;   // per launch (the parameter block stays under 4 KB)
// Activations in shared memory: group g at float offset 36·g (4 floats of
// padding: the 16-byte reads of consecutive threads then hit different banks).
constexpr int kXStride = 36;

struct Launch {
  MxTask task[kMaxTasks];
  int ntasks, rows, cols, rs;
};

// The shape of the last launch (mxfp4_last_launch).
extern Mxfp4Launch g_last;

// value(code) · 2^-14
__device__ __forceinline__ float e2m1_scaled(uint32_t code) {
  const uint32_t h = ((code & 8u) << 12) | ((code & 7u) << 9);
  return __half2float(__ushort_as_half(uint16_t(h)));
}

// The bf16-pair table entry of code byte b: the two codes' bf16 patterns,
// low code in the low half. Every E2M1 value ·2^-14 is exact in bf16 (at most
// two significant bits).
__device__ __forceinline__ uint32_t e2m1_bf16_pair(uint32_t b) {
  return (__float_as_uint(e2m1_scaled(b & 15u)) >> 16) | (__float_as_uint(e2m1_scaled(b >> 4)) & 0xffff0000u);
}

// Occupancy of one kernel at one launch shape, computed once per device,
// thread count and shared memory size (a host-side cost otherwise paid on
// every decode step). Each kernel instantiation keeps its own.
struct Occupancy {
  int dev = -1, threads = 0, per_sm = 0, sms = 0;
  size_t smem = 0;
};

// Launches `kernel` on a persistent grid over the launch's tiles (tile_rows
// rows of one task each): at most occupancy × SMs blocks, each taking a
// contiguous range of tiles. pdl: with programmatic dependent launch
// (common.cuh; the kernel must wait before it reads activations).
template <typename Kernel>
void launch_persistent(Kernel kernel, Occupancy& occ, const Launch& L, int tile_rows, int threads, size_t smem,
                       cudaStream_t stream, const char* what, bool pdl = false) {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev != occ.dev || threads != occ.threads || smem != occ.smem) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), "smem attribute");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ.per_sm, kernel, threads, smem), "occupancy");
    occ.sms = sm_count();
    occ.dev = dev, occ.threads = threads, occ.smem = smem;
  }
  const int64_t tiles = int64_t(L.ntasks) * ((L.rows + tile_rows - 1) / tile_rows);
  const int blocks = int(std::min<int64_t>(tiles, int64_t(std::max(occ.per_sm, 1)) * occ.sms));
  g_last = {blocks, threads, occ.per_sm, smem};
  if (pdl) return launch_pdl(kernel, dim3(blocks), dim3(threads), smem, stream, what, L);
  kernel<<<blocks, threads, smem, stream>>>(L);
  check_launch(what);
}

// The float2 table entry of code byte b: the two codes' values ·2^-14, low
// code first.
__device__ __forceinline__ float2 e2m1_f2_pair(uint32_t b) { return make_float2(e2m1_scaled(b & 15u), e2m1_scaled(b >> 4)); }

// The eight codes of a 32-bit code word (column i is nibble i) -> d[i] by a
// shared-memory table (every kernel's lookup decode): the entry of code byte
// b for this lane sits at lut + 256·b + lane_off (lane_off < 256), so one
// PRMT builds its address (bytes: lane_off, b, 0, 0). kF2: float2 entries
// (PRMT, LDS.64 per two codes); else bf16 pairs (PRMT, LDS.32, a shift and a
// mask per two codes; half the shared-memory bytes).
template <bool kF2>
__device__ __forceinline__ void lut_decode(const char* lut, uint32_t word, uint32_t lane_off, float (&d)[8]) {
#pragma unroll
  for (int b = 0; b < 4; b++) {
    const uint32_t off = __byte_perm(word, lane_off, 0x5504u | (uint32_t(b) << 4));
    if constexpr (kF2) {
      const float2 v = *reinterpret_cast<const float2*>(lut + off);
      d[2 * b] = v.x, d[2 * b + 1] = v.y;
    } else {
      const uint32_t v = *reinterpret_cast<const uint32_t*>(lut + off);
      d[2 * b] = bf16_lo(v), d[2 * b + 1] = bf16_hi(v);
    }
  }
}

// ---- What the tensor-core kernels share (mxfp4_mma.cu, mxfp4_frag.cu).
// bf16 bits of an exact value.
__device__ __forceinline__ uint32_t bf16_bits(float f) { return __float_as_uint(f) >> 16; }
// value(code) · 2^-2, exact.
__device__ __forceinline__ float e2m1_quarter(uint32_t code) { return __fmul_rn(e2m1_scaled(code), 4096.0f); }
// The table entry of code byte b for the tensor-core kernels: both codes'
// value · 2^-2 as bf16, low code in the low half.
__device__ __forceinline__ uint32_t e2m1_quarter_pair(uint32_t b) {
  return bf16_bits(e2m1_quarter(b & 15u)) | (bf16_bits(e2m1_quarter(b >> 4)) << 16);
}
// 2^(s-127) as a bf16 pair (s = 0: the subnormal 2^-127): what a group's A
// registers are multiplied by.
__device__ __forceinline__ uint32_t e8m0_bf16_pair(uint32_t s) {
  const uint32_t s7 = max(s << 7, 0x40u);
  return s7 | (s7 << 16);
}

__device__ __forceinline__ uint32_t bmul2(uint32_t a, uint32_t b) {
  uint32_t d;  // a·b + (-0): exact for the products here, and -0 keeps a -0 product
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}
// D += A·B, bf16 in, FP32 sums (the tensor core's order).
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// x = hi + mid + lo exactly, each a bf16 (truncations; the rests are exact).
__device__ __forceinline__ void split3(float x, uint32_t& hi, uint32_t& mid, uint32_t& lo) {
  const uint32_t hb = __float_as_uint(x) & 0xffff0000u;
  const float r1 = __fsub_rn(x, __uint_as_float(hb));
  const uint32_t mb = __float_as_uint(r1) & 0xffff0000u;
  const float r2 = __fsub_rn(r1, __uint_as_float(mb));
  hi = hb >> 16, mid = mb >> 16, lo = __float_as_uint(r2) >> 16;
}
// Eight activations -> their three bf16 parts as pairs: part[p][k] holds
// columns 2k (low half) and 2k + 1 of part p.
__device__ __forceinline__ void split3_pairs(const float (&v)[8], uint32_t (&part)[3][4]) {
#pragma unroll
  for (int k = 0; k < 4; k++) {
    uint32_t h0, m0, l0, h1, m1, l1;
    split3(v[2 * k], h0, m0, l0);
    split3(v[2 * k + 1], h1, m1, l1);
    part[0][k] = h0 | (h1 << 16), part[1][k] = m0 | (m1 << 16), part[2][k] = l0 | (l1 << 16);
  }
}

// Weight loads of the decode kernels (warp, mma): weights are read once, so
// no L1 allocation; volatile asm keeps the compiler from sinking each load to
// its first use.
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ld_stream8(const void* p) {
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ld_stream16bit(const void* p) {
  uint16_t v;
  asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

// The warp kernel (mxfp4_warp.cu): decode launches (one token per task).
// Returns false when the tuning is not a warp tuning.
bool launch_warp(const Launch& L, Mxfp4Tuning t, cudaStream_t stream);

// The tensor-core kernel (mxfp4_mma.cu), 1 or 2 tokens a pass, for an mma
// tuning. Returns false when the width is one it does not take.
inline bool is_mma(Mxfp4Decode d) { return d == Mxfp4Decode::mma || d == Mxfp4Decode::mma3; }
bool mma_takes(int cols);
bool launch_mma(const Launch& L, int tokens_per_pass, Mxfp4Tuning t, cudaStream_t stream);

// Splits a grouped call into launches of at most kMaxTasks tasks, the empty
// ones left out, after checking its shape and every task (token counts,
// 16-byte aligned weights and activations); launch(L, most tokens of a task)
// for each.
template <typename F>
void for_each_launch(const MxTask* tasks, int ntasks, int rows, int cols, F launch) {
  if (rows < 0 || cols <= 0 || cols % 32 != 0 || cols > kMaxCols || ntasks < 0)
    throw std::invalid_argument("cuda: mxfp4: unsupported shape " + std::to_string(rows) + "x" + std::to_string(cols));
  Launch L{};
  L.rows = rows, L.cols = cols;
  for (int base = 0; base < ntasks; base += kMaxTasks) {
    L.ntasks = 0;
    int max_n = 0;
    for (int i = base; i < std::min(ntasks, base + kMaxTasks); i++) {
      const MxTask& t = tasks[i];
      if (t.n < 0) throw std::invalid_argument("cuda: mxfp4: negative token count");
      if (t.n == 0 || rows == 0) continue;
      if (reinterpret_cast<uintptr_t>(t.packed) % 16 != 0 || reinterpret_cast<uintptr_t>(t.X) % 16 != 0)
        throw std::invalid_argument("cuda: mxfp4: packed weights and activations must be 16-byte aligned");
      L.task[L.ntasks++] = t;
      max_n = std::max(max_n, t.n);
    }
    if (L.ntasks > 0) launch(L, max_n);
  }
}

}  // namespace sluice::cuda::detail
