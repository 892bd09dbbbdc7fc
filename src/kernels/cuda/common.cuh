// kernels/cuda/common.cuh — what every .cu file here shares: error checks,
// the stream cast, programmatic dependent launch, and exact scalar helpers.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

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

// Programmatic dependent launch (PDL, sm_90+): a kernel launched by
// launch_pdl may start while the kernel before it on the stream drains. It
// calls let_next_kernel_start() at its start (so the next one may start in
// turn) and wait_for_previous_kernel() before it reads anything a kernel
// wrote (activations) or writes anything (outputs); weights come only from
// copies, so it may load them before the wait. Both are no-ops in a launch
// without the attribute. Same arithmetic and bits either way.
__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// The process-wide switch (cuda::set_pdl) and the current device is sm_90+.
bool pdl_enabled();
// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute
// when pdl_enabled(). Only kernels that call wait_for_previous_kernel()
// before their first activation read may be launched this way.
template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* what,
                Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  if (pdl_enabled()) cfg.attrs = attr, cfg.numAttrs = 1;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
}

// Host seconds since t0 (the steady clock).
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Two timing events, made and destroyed together; seconds from a to b.
struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  double seconds() const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return double(ms) * 1e-3;
  }
};

// The best of `reps` timings of f's work on `stream` (events around it),
// after one warm-up: the ceilings (backend_cuda.cu) and the bus rates.
template <class F>
double best_gpu_seconds(cudaStream_t stream, int reps, F&& f) {
  Events e;
  double best = 1e30;
  for (int rep = 0; rep <= reps; rep++) {
    check(cudaEventRecord(e.a, stream), "cudaEventRecord");
    f();
    check(cudaEventRecord(e.b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(e.b), "cudaEventSynchronize");
    if (rep > 0) best = std::min(best, e.seconds());
  }
  return best;
}

// bf16 -> f32 is exact: the 16 stored bits are the high half.
__device__ __forceinline__ float bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// E8M0 -> 2^(s-127), exact: s = 0 is the subnormal 2^-127 (0x00400000), not
// 0; for s >= 1, s << 23 >= 0x00800000 is the larger, so a max picks either
// (a shift and a max: one instruction fewer than a select on s).
__device__ __forceinline__ float e8m0(uint32_t s) { return __uint_as_float(max(s << 23, 0x00400000u)); }

}  // namespace sluice::cuda::detail
