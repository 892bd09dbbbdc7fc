// kernels/cuda/device.cu — which GPU, if any.
#include <cstdio>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the sticky error, report none
    return 0;
  }
  return n;
}

const char* device_name() {
  static thread_local char buf[512];
  int dev = 0;
  cudaDeviceProp p{};
  detail::check(cudaGetDevice(&dev), "cudaGetDevice");
  detail::check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  std::snprintf(buf, sizeof buf, "%.256s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
                double(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace sluice::cuda
