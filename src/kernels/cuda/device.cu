// kernels/cuda/device.cu — which GPU, if any, its read ceiling, and the
// programmatic-dependent-launch switch.
#include <cstdio>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"

namespace sluice::cuda {

namespace {

// Reads every 16-byte word once; the XOR keeps the loads alive.
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, uint32_t* out) {
  uint32_t acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride), d = __ldg(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldg(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // almost never: only keeps the loads
}

bool g_pdl = true;

}  // namespace

bool detail::pdl_enabled() {
  static thread_local int dev = -1, major = 0;
  if (!g_pdl) return false;
  int d = 0;
  detail::check(cudaGetDevice(&d), "cudaGetDevice");
  if (d != dev) detail::check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d), "cudaDeviceGetAttribute"), dev = d;
  return major >= 9;
}

void set_pdl(bool on) { g_pdl = on; }

void read_all(const void* p, size_t bytes, uint32_t* sink, int blocks, void* stream) {
  read_kernel<<<blocks, 512, 0, detail::as_stream(stream)>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  detail::check_launch("read kernel");
}

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
