// kernels/cuda/bus_rates.cu — the rates the GPU placement plans with,
// measured on this card and host now (BusRates, kernels/device.h).
//
// A run under --vram decides with them what `sluice plan` decides with its
// figures (which spine pieces the GPU holds, whether a byte of experts there
// saves more than one of spine, whether a matrix off the GPU goes up per call
// or stays on the CPU), and the plan on a machine with a GPU projects with them.
//
// One host buffer: its first cpu_bytes (cpu_set) are the CPU's matrices (the caller's
// working set beyond the last-level caches: kernels/rate_probe.h), the rest
// the DMA's source, so the two read different RAM at once as a split does
// (the spine's CPU rows and its GPU rows), and from RAM, as a step reads.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/upload.h"

namespace sluice::cuda {
using namespace detail;
namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kDmaBytes = 128 * kMiB;
constexpr size_t kDev = 128 * kMiB;         // the DMA's destination, and the GEMV's matrices
constexpr size_t kDevIo = 1 * kMiB;         // x and y beside them
constexpr int kRows = 2048, kCols = 8192;   // one matrix: 32 MiB of bf16 (K3's widths are 7168 and up)
constexpr size_t kMatrix = size_t(kRows) * kCols * 2;

// The CPU entry's matvec over matrix i (cycling) of the CPU's `count` matrices.
void cpu_matvec(const Backend& cpu, const uint16_t* host, int count, int i, const float* x, float* y) {
  const Bf16Ref W{host + size_t(i % count) * kMatrix / 2, kRows, kCols, 0};
  cpu.matmul_bf16(W, x, 1, y);
}

}  // namespace

BusRates measure_bus_rates(const Backend& cpu, size_t vram_room, size_t cpu_bytes) {
  BusRates r;
  if (vram_room < kDev + kDevIo + 32 * kMiB) return r;  // the probe's VRAM, and a margin for the driver
  const int cpu_mats = int(std::max<size_t>(cpu_bytes / kMatrix, 2));
  const size_t cpu_set = size_t(cpu_mats) * kMatrix, host_bytes = cpu_set + kDmaBytes;
  char* dev = nullptr;
  if (cudaMalloc(&dev, kDev + kDevIo) != cudaSuccess) {
    cudaGetLastError();
    return r;
  }
  auto* host = static_cast<uint16_t*>(std::aligned_alloc(4096, host_bytes));
  if (!host) {
    cudaFree(dev);
    return r;
  }
  struct Release {
    char* dev;
    void* host;
    bool registered = false;
    ~Release() {
      if (registered) cudaHostUnregister(host);
      cudaGetLastError();
      cudaFree(dev);
      std::free(host);
    }
  } release{dev, host};
  std::fill(host, host + host_bytes / 2, uint16_t(0x3f80));  // bf16 1.0: finite products
  check(cudaMemset(dev, 0, kDev + kDevIo), "cudaMemset");
  std::vector<float> x(kCols, 0.5f), y(kRows);
  Uploader up;
  const cudaStream_t upload_stream = as_stream(up.stream());
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  struct StreamGone {
    cudaStream_t s;
    ~StreamGone() { cudaStreamDestroy(s); }
  } stream_gone{stream};
  const char* dma_src = reinterpret_cast<const char*>(host) + cpu_set;

  // From pageable RAM through the staging (an upload per call of a spine matrix).
  r.staged_gbs = double(kDmaBytes) / best_gpu_seconds(upload_stream, 2, [&] { up.copy(dev, dma_src, kDmaBytes, false); }) / 1e9;
  // The GPU's GEMV over the matrices now in VRAM (4 of 32 MiB: beyond L2).
  auto* dx = reinterpret_cast<float*>(dev + kDev);
  float* dy = dx + kCols;
  check(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "h2d");
  const int mats = int(kDev / kMatrix);
  r.gemv_gbs = double(kDev) / best_gpu_seconds(stream, 3, [&] {
    for (int i = 0; i < mats; i++)
      matvec_bf16(reinterpret_cast<const uint16_t*>(dev + size_t(i) * kMatrix), kRows, kCols, dx, dy, stream);
  }) / 1e9;
  // One call's own cost, as the entry makes a call: the activation in, a
  // small GEMV, its result out, the host waits (the median of 31).
  {
    std::vector<double> t;
    for (int rep = 0; rep < 32; rep++) {
      const auto t0 = std::chrono::steady_clock::now();
      check(cudaMemcpyAsync(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice, stream), "h2d");
      matvec_bf16(reinterpret_cast<const uint16_t*>(dev), 16, kCols, dx, dy, stream);
      check(cudaMemcpyAsync(y.data(), dy, 16 * sizeof(float), cudaMemcpyDeviceToHost, stream), "d2h");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      if (rep > 0) t.push_back(seconds_since(t0));
    }
    std::nth_element(t.begin(), t.begin() + long(t.size() / 2), t.end());
    r.call_s = t[t.size() / 2];
  }
  // The CPU's matvec alone: a pass over its matrices warms the pool, then
  // the median of three passes (a shared machine's neighbours come and go).
  const auto matvec = [&](int i) { cpu_matvec(cpu, host, cpu_mats, i, x.data(), y.data()); };
  for (int i = 0; i < cpu_mats; i++) matvec(i);
  {
    std::vector<double> pass;
    for (int p = 0; p < 3; p++) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < cpu_mats; i++) matvec(i);
      pass.push_back(seconds_since(t0));
    }
    std::sort(pass.begin(), pass.end());
    r.cpu_gbs = double(cpu_set) / pass[1] / 1e9;
  }
  // Pinned: the DMA alone, then the two at once.
  if (cudaHostRegister(host, host_bytes, cudaHostRegisterDefault) != cudaSuccess) {
    cudaGetLastError();  // not pinned here: the split's rates stay unmeasured
    r.measured = true;
    return r;
  }
  release.registered = true;
  r.pinned_gbs = double(kDmaBytes) / best_gpu_seconds(upload_stream, 2, [&] { up.copy(dev, dma_src, kDmaBytes, true); }) / 1e9;
  {
    // About 40 ms of DMA queued, the CPU's matvec looping until it is done.
    const int copies = std::max(2, int(0.04 * r.pinned_gbs * 1e9 / double(kDmaBytes)));
    Events e;
    check(cudaEventRecord(e.a, upload_stream), "cudaEventRecord");
    for (int c = 0; c < copies; c++) up.copy(dev, dma_src, kDmaBytes, true);
    check(cudaEventRecord(e.b, upload_stream), "cudaEventRecord");
    const auto t0 = std::chrono::steady_clock::now();
    int done = 0;
    while (cudaEventQuery(e.b) == cudaErrorNotReady) matvec(done++);
    const double cpu_s = seconds_since(t0);
    check(cudaEventSynchronize(e.b), "cudaEventSynchronize");
    r.dma_beside_cpu_gbs = double(copies) * double(kDmaBytes) / e.seconds() / 1e9;
    if (done > 0) r.cpu_beside_dma_gbs = double(done) * double(kMatrix) / cpu_s / 1e9;
  }
  r.measured = true;
  return r;
}

}  // namespace sluice::cuda
