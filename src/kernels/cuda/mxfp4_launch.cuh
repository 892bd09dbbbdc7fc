// kernels/cuda/mxfp4_launch.cuh — what the MXFP4 kernels (mxfp4.cu, the
// team kernels; mxfp4_warp.cu, the warp kernel for decode) share: the launch
// parameter block, the shape limits, the exact E2M1 value and the table
// layouts. The reduction order they all follow is in mxfp4.cu's header.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

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

// The warp kernel (mxfp4_warp.cu): decode launches (one token per task).
// Returns false when the tuning is not a warp tuning.
bool launch_warp(const Launch& L, Mxfp4Tuning t, cudaStream_t stream);

}  // namespace sluice::cuda::detail
