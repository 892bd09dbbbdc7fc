// kernels/cuda/common.cuh — what every .cu file here shares: error checks,
// the stream cast, and exact scalar helpers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sluice::cuda::detail {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
// After a launch: a bad configuration shows up here, not at the next sync.
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

inline int sm_count() {
  int dev = 0, n = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  return n;
}

// bf16 -> f32 is exact: the 16 stored bits are the high half.
__device__ __forceinline__ float bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// E8M0 -> 2^(s-127), exact: s = 0 is the subnormal 2^-127 (0x00400000), not
// 0; for s >= 1, s << 23 >= 0x00800000 is the larger, so a max picks either
// (a shift and a max: one instruction fewer than a select on s).
__device__ __forceinline__ float e8m0(uint32_t s) { return __uint_as_float(max(s << 23, 0x00400000u)); }

}  // namespace sluice::cuda::detail
