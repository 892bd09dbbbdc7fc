// bench/cuda_kernels.cu — the CUDA kernels against the GPU's own ceilings,
// measured in the same run (build/bench_cuda; built with SLUICE_CUDA).
//
//   bench_cuda [--quick] [--only DECODE]
//
// Ceilings: a pure-read kernel over 4 GiB (16-byte loads, every byte read
// once) and a device-to-device copy (bytes read + written), pinned host ->
// device and device -> host copies. Kernels: MXFP4 expert GEMV at K3 shapes
// — one MoE decode step's 16 experts, gate+up as one grouped launch (32
// matrices 3072×3584) and down as another (16 matrices 3584×3072) — for
// every decode tuning and in fragment order (mxfp4_frag.cu: the same experts
// permuted once into a second buffer), a prefill grouped GEMM, and bf16 GEMV at spine
// shapes. Weight sets rotate through more memory than L2 holds (60 MB), so
// every call reads HBM. Then H2D copies of experts overlapped with GEMVs on
// another stream. The bf16 GEMVs and the default MXFP4 tuning's two
// launches are timed back to back with and without programmatic dependent
// launch (the default). Times are CUDA events around whole batches; each
// figure is the median of 7 batches. Random data everywhere (never zeros).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/upload.h"
#include "kernels/kda_parts.h"
#include "kernels/ref.h"

using namespace sluice;

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void fill_random(uint8_t* p, size_t n, uint64_t seed, uint8_t lo, uint8_t span) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    p[i] = span ? uint8_t(lo + z % span) : uint8_t(z);
  }
}

__global__ void fill_floats(float* p, size_t n, uint64_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    p[i] = float(int32_t(z >> 40) - (1 << 23)) / float(1 << 23);  // uniform in [-1, 1)
  }
}

// bf16 in ±[2^-4, 2^4): random mantissa and sign, exponent 123..130.
__global__ void fill_bf16(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    p[i] = uint16_t(((z >> 16) & 0x8000u) | ((123u + (z >> 20) % 8u) << 7) | (z & 0x7fu));
  }
}

void* dev_alloc(size_t bytes) {
  void* p = nullptr;
  ok(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void random_bytes(void* p, size_t n, uint64_t seed, uint8_t lo = 0, uint8_t span = 0) {
  fill_random<<<1024, 256>>>(static_cast<uint8_t*>(p), n, seed, lo, span);
  ok(cudaGetLastError(), "fill");
}

// Median ms per call of f over 7 batches of `iters` calls (after one warm batch).
double time_ms(int iters, const std::function<void(int)>& f, cudaStream_t s = nullptr) {
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  std::vector<double> ms;
  for (int rep = 0; rep < 8; rep++) {
    ok(cudaEventRecord(a, s), "record");
    for (int i = 0; i < iters; i++) f(rep * iters + i);
    ok(cudaEventRecord(b, s), "record");
    ok(cudaEventSynchronize(b), "sync");
    float t = 0;
    ok(cudaEventElapsedTime(&t, a, b), "elapsed");
    if (rep > 0) ms.push_back(double(t) / iters);
  }
  ok(cudaGetLastError(), "timed kernels");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Row {
  std::string what;
  double gbs, frac;
};
std::vector<Row> summary;
double g_ceiling = 0;

void report(const std::string& what, double bytes, double ms, double ceiling) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-58s %9.3f ms %8.1f GB/s  %.2f of ceiling\n", what.c_str(), ms, gbs, ceiling > 0 ? gbs / ceiling : 0.0);
  summary.push_back({what, gbs, ceiling > 0 ? gbs / ceiling : 0.0});
}

// One routed expert laid out as in the checkpoint (spec §2.10):
// w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale.
constexpr int kLatent = 3584, kInter = 3072, kTopK = 16;
constexpr size_t kW13Packed = size_t(kInter) * kLatent / 2, kW13Scale = size_t(kInter) * kLatent / 32;
constexpr size_t kW2Packed = size_t(kLatent) * kInter / 2, kW2Scale = size_t(kLatent) * kInter / 32;
constexpr size_t kExpertBytes = 2 * (kW13Packed + kW13Scale) + kW2Packed + kW2Scale;  // 17,547,264
struct Expert {
  const uint8_t *w1p, *w1s, *w2p, *w2s, *w3p, *w3s;
};
Expert expert_at(const uint8_t* base) {
  Expert e;
  e.w1p = base, e.w1s = e.w1p + kW13Packed;
  e.w2p = e.w1s + kW13Scale, e.w2s = e.w2p + kW2Packed;
  e.w3p = e.w2s + kW2Scale, e.w3s = e.w3p + kW13Packed;
  return e;
}

double check_expert_gemv(const uint8_t* base_dev, const float* x_dev, const uint8_t* frag_dev = nullptr) {
  // w1 of one expert vs ref::matvec_mxfp4 on the host: max |Δ| / Σ|w·x|
  // (frag_dev: its copy in fragment order, at the same offsets, computed).
  const Expert e = expert_at(base_dev);
  std::vector<uint8_t> p(kW13Packed), s(kW13Scale);
  std::vector<float> x(kLatent), want(kInter), got(kInter), w(kLatent);
  ok(cudaMemcpy(p.data(), e.w1p, p.size(), cudaMemcpyDeviceToHost), "copy");
  ok(cudaMemcpy(s.data(), e.w1s, s.size(), cudaMemcpyDeviceToHost), "copy");
  ok(cudaMemcpy(x.data(), x_dev, sizeof(float) * kLatent, cudaMemcpyDeviceToHost), "copy");
  float* y = static_cast<float*>(dev_alloc(sizeof(float) * kInter));
  if (frag_dev) {
    const Expert f = expert_at(frag_dev);
    const cuda::MxTask t{f.w1p, f.w1s, x_dev, y, 1};
    cuda::grouped_mxfp4_frag(&t, 1, kInter, kLatent);
  } else {
    cuda::matvec_mxfp4(e.w1p, e.w1s, kInter, kLatent, x_dev, y);
  }
  ok(cudaMemcpy(got.data(), y, sizeof(float) * kInter, cudaMemcpyDeviceToHost), "copy");
  cudaFree(y);
  ref::matvec_mxfp4(p.data(), s.data(), kInter, kLatent, x.data(), want.data());
  double worst = 0;
  for (int r = 0; r < kInter; r++) {
    ref::dequant_mxfp4_row(p.data(), s.data(), kLatent, r, w.data());
    double a = 0;
    for (int c = 0; c < kLatent; c++) a += std::fabs(double(w[c]) * x[c]);
    worst = std::max(worst, std::fabs(double(got[r]) - want[r]) / std::max(a, 1e-30));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  const char* only = nullptr;  // --only DECODE: time just that MXFP4 decode tuning (e.g. under ncu)
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_cuda [--quick] [--only DECODE]\n");
      return 2;
    }
  }
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "bench_cuda: no CUDA device\n");
    return 1;
  }
  std::printf("device: %s\n", cuda::device_name());
  int dev = 0, l2 = 0;
  ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "attr");
  std::printf("L2: %.0f MB\n\n", l2 / 1e6);

  // ---- ceilings
  const size_t read_bytes = size_t(quick ? 1 : 4) << 30;
  uint8_t* big = static_cast<uint8_t*>(dev_alloc(read_bytes));
  random_bytes(big, read_bytes, 1);
  uint32_t* sink = static_cast<uint32_t*>(dev_alloc(sizeof(uint32_t)));
  int sms = 0;
  ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "attr");
  double best_read = 0;
  for (int per_sm : {4, 8, 16}) {
    const double ms = time_ms(5, [&](int) {
      cuda::read_all(big, read_bytes, sink, sms * per_sm);
    });
    const double gbs = double(read_bytes) / (ms * 1e-3) / 1e9;
    std::printf("read kernel, %2d blocks/SM × 512 threads                   %9.3f ms %8.1f GB/s\n", per_sm, ms, gbs);
    best_read = std::max(best_read, gbs);
  }
  const size_t copy_bytes = read_bytes / 2;
  const double copy_ms = time_ms(5, [&](int) {
    ok(cudaMemcpyAsync(big + copy_bytes, big, copy_bytes, cudaMemcpyDeviceToDevice), "d2d");
  });
  const double d2d = 2.0 * double(copy_bytes) / (copy_ms * 1e-3) / 1e9;
  std::printf("device-to-device copy (read + write)                       %9.3f ms %8.1f GB/s\n", copy_ms, d2d);
  g_ceiling = best_read;
  std::printf("HBM read ceiling (best read kernel): %.1f GB/s\n\n", g_ceiling);
  summary.push_back({"HBM read ceiling (read kernel)", best_read, 1.0});
  summary.push_back({"D2D copy (read+write)", d2d, d2d / best_read});

  const size_t h2d_bytes = size_t(quick ? 256 : 1024) << 20;
  uint8_t* host = nullptr;
  ok(cudaHostAlloc(&host, h2d_bytes, cudaHostAllocDefault), "cudaHostAlloc");
  for (size_t i = 0; i < h2d_bytes; i += 4096) host[i] = uint8_t(i * 131);
  const double h2d_ms =
      time_ms(2, [&](int) { ok(cudaMemcpyAsync(big, host, h2d_bytes, cudaMemcpyHostToDevice), "h2d"); });
  const double h2d = double(h2d_bytes) / (h2d_ms * 1e-3) / 1e9;
  const double d2h_ms =
      time_ms(2, [&](int) { ok(cudaMemcpyAsync(host, big, h2d_bytes, cudaMemcpyDeviceToHost), "d2h"); });
  const double d2h = double(h2d_bytes) / (d2h_ms * 1e-3) / 1e9;
  std::printf("pinned H2D %4zu MiB: %.1f GB/s; D2H %.1f GB/s\n", h2d_bytes >> 20, h2d, d2h);
  summary.push_back({"pinned H2D (1 GiB copy)", h2d, 0});
  // Chunked: 16 experts' worth in 17.5 MB copies, the way experts will arrive.
  const int chunks = int(std::min<size_t>(h2d_bytes / kExpertBytes, 16));
  const double chunk_ms = time_ms(2, [&](int) {
    for (int c = 0; c < chunks; c++)
      ok(cudaMemcpyAsync(big + c * kExpertBytes, host + c * kExpertBytes, kExpertBytes, cudaMemcpyHostToDevice), "h2d");
  });
  const double h2d_chunk = double(chunks) * kExpertBytes / (chunk_ms * 1e-3) / 1e9;
  std::printf("pinned H2D in %d expert-sized copies: %.1f GB/s (%.2f of the 1 GiB copy)\n\n", chunks, h2d_chunk,
              h2d_chunk / h2d);
  summary.push_back({"pinned H2D, expert-sized (17.5 MB) copies", h2d_chunk, 0});
  cudaFree(big);

  // ---- MXFP4 expert GEMV at K3 shapes
  const int sets = quick ? 4 : 8;  // sets × 16 experts × 17.5 MB, far over L2
  uint8_t* experts = static_cast<uint8_t*>(dev_alloc(sets * kTopK * kExpertBytes));
  random_bytes(experts, sets * kTopK * kExpertBytes, 2);
  // Scales in 118..133 (weights of size ~2^-9..2^6 as in a real checkpoint).
  for (int e = 0; e < sets * kTopK; e++) {
    const Expert x = expert_at(experts + e * kExpertBytes);
    random_bytes(const_cast<uint8_t*>(x.w1s), kW13Scale, 10 + e, 118, 16);
    random_bytes(const_cast<uint8_t*>(x.w2s), kW2Scale, 20 + e, 118, 16);
    random_bytes(const_cast<uint8_t*>(x.w3s), kW13Scale, 30 + e, 118, 16);
  }
  float* act = static_cast<float*>(dev_alloc(sizeof(float) * (kLatent + 3 * kTopK * kInter + kTopK * kLatent)));
  fill_floats<<<256, 256>>>(act, kLatent + 3 * kTopK * kInter, 3);
  float* lat = act;                      // ℓ, the latent input of every expert
  float* g = lat + kLatent;              // [16][3072] gate outputs
  float* u = g + kTopK * kInter;         // [16][3072] up outputs
  float* h = u + kTopK * kInter;         // [16][3072] SiTU inputs to w2 (random, fixed)
  float* o = h + kTopK * kInter;         // [16][3584] expert outputs
  std::vector<std::vector<cuda::MxTask>> up_tasks(sets), down_tasks(sets);
  for (int s = 0; s < sets; s++)
    for (int k = 0; k < kTopK; k++) {
      const Expert e = expert_at(experts + (s * kTopK + k) * kExpertBytes);
      up_tasks[s].push_back({e.w1p, e.w1s, lat, g + k * kInter, 1});
      up_tasks[s].push_back({e.w3p, e.w3s, lat, u + k * kInter, 1});
      down_tasks[s].push_back({e.w2p, e.w2s, h + k * kInter, o + k * kLatent, 1});
    }
  const double up_bytes = 2.0 * kTopK * (kW13Packed + kW13Scale), down_bytes = double(kTopK) * (kW2Packed + kW2Scale);
  // One kernel over the rotating sets: gate+up, down, and both back to back
  // (the step), each against the ceiling; returns the step's time.
  using Grouped = void (*)(const cuda::MxTask*, int, int, int, void*);
  using TaskSets = std::vector<std::vector<cuda::MxTask>>;
  auto time_experts = [&](const std::string& name, double err, Grouped grouped, const TaskSets& upt, const TaskSets& dnt) {
    const double up_ms = time_ms(20, [&](int i) { grouped(upt[i % sets].data(), 2 * kTopK, kInter, kLatent, nullptr); });
    const double down_ms = time_ms(20, [&](int i) { grouped(dnt[i % sets].data(), kTopK, kLatent, kInter, nullptr); });
    const double step_ms = time_ms(20, [&](int i) {
      grouped(upt[i % sets].data(), 2 * kTopK, kInter, kLatent, nullptr);
      grouped(dnt[i % sets].data(), kTopK, kLatent, kInter, nullptr);
    });
    const cuda::Mxfp4Launch ll = cuda::mxfp4_last_launch();
    std::printf("MXFP4 [%s] max |Δ|/Σ|w·x| vs ref = %.2e; down launch: %d blocks × %d threads, %d/SM, %zu B smem\n",
                name.c_str(), err, ll.blocks, ll.threads, ll.blocks_per_sm, ll.smem_bytes);
    report("MXFP4 gate+up, 32×(3072×3584), " + name, up_bytes, up_ms, g_ceiling);
    report("MXFP4 down, 16×(3584×3072), " + name, down_bytes, down_ms, g_ceiling);
    report("MXFP4 16 experts (both launches), " + name, up_bytes + down_bytes, step_ms, g_ceiling);
    return step_ms;
  };
  const cuda::Mxfp4Tuning default_tuning = cuda::mxfp4_tuning();
  double best_step = 1e30;
  std::string best_name;
  for (const cuda::Mxfp4Tuning tuning : cuda::mxfp4_tunings()) {
    const cuda::Mxfp4Decode dec = tuning.decode;
    const int rpt = tuning.rows_per_thread;
    if (only && std::strcmp(only, cuda::mxfp4_decode_name(dec)) != 0) continue;
    cuda::set_mxfp4_tuning(tuning);
    const std::string name = std::string(cuda::mxfp4_decode_name(dec)) + ", " + std::to_string(rpt) + " rows/thread";
    const double step_ms = time_experts(name, check_expert_gemv(experts, lat), cuda::grouped_mxfp4, up_tasks, down_tasks);
    if (step_ms < best_step) best_step = step_ms, best_name = name;
  }
  // Fragment order (mxfp4_frag.cu, the engine's kernel at these widths): the
  // same experts permuted once into a second buffer.
  uint8_t* frag = static_cast<uint8_t*>(dev_alloc(sets * kTopK * kExpertBytes));
  std::vector<std::vector<cuda::MxTask>> fup_tasks = up_tasks, fdown_tasks = down_tasks;
  {
    auto permute = [&](cuda::MxTask& t, int rows, int cols) {
      uint8_t* p = frag + (t.packed - experts);
      uint8_t* sc = frag + (t.scale - experts);
      cuda::mxfp4_frag_packed(t.packed, rows, cols, p);
      cuda::mxfp4_frag_scale(t.scale, rows, cols, sc);
      t.packed = p, t.scale = sc;
    };
    for (int s = 0; s < sets; s++) {
      for (cuda::MxTask& t : fup_tasks[s]) permute(t, kInter, kLatent);
      for (cuda::MxTask& t : fdown_tasks[s]) permute(t, kLatent, kInter);
    }
    ok(cudaDeviceSynchronize(), "fragment order");
    const double step_ms = time_experts("fragment order", check_expert_gemv(experts, lat, frag), cuda::grouped_mxfp4_frag,
                                        fup_tasks, fdown_tasks);
    if (step_ms < best_step) best_step = step_ms, best_name = "fragment order";
    // The permutation itself (what a tier or upload pays once per expert).
    const double perm_ms = time_ms(5, [&](int i) {
      const Expert e = expert_at(experts + size_t(i % (sets * kTopK)) * kExpertBytes);
      uint8_t* o = frag + size_t(i % (sets * kTopK)) * kExpertBytes;
      cuda::mxfp4_frag_packed(e.w1p, kInter, kLatent, o);
      cuda::mxfp4_frag_scale(e.w1s, kInter, kLatent, o + kW13Packed);
      cuda::mxfp4_frag_packed(e.w2p, kLatent, kInter, o + kW13Packed + kW13Scale);
      cuda::mxfp4_frag_scale(e.w2s, kLatent, kInter, o + kW13Packed + kW13Scale + kW2Packed);
      cuda::mxfp4_frag_packed(e.w3p, kInter, kLatent, o + kW13Packed + kW13Scale + kW2Packed + kW2Scale);
      cuda::mxfp4_frag_scale(e.w3s, kInter, kLatent, o + 2 * kW13Packed + kW13Scale + kW2Packed + kW2Scale);
    });
    std::printf("fragment order permutation of one expert (17.5 MB read + written): %.3f ms\n", perm_ms);
  }
  std::printf("best MXFP4 tuning: %s\n", best_name.c_str());
  // The default tuning without programmatic dependent launch: each launch
  // waits for the last to finish before its first loads.
  cuda::set_mxfp4_tuning(default_tuning);
  cuda::set_pdl(false);
  {
    const double ms = time_ms(20, [&](int i) {
      cuda::grouped_mxfp4(up_tasks[i % sets].data(), 2 * kTopK, kInter, kLatent);
      cuda::grouped_mxfp4(down_tasks[i % sets].data(), kTopK, kLatent, kInter);
    });
    report("MXFP4 16 experts (both launches), default tuning, no PDL", up_bytes + down_bytes, ms, g_ceiling);
  }
  cuda::set_pdl(true);
  // The read kernel over the same bytes in the same two launches (gate+up's,
  // then down's): what launches of these sizes reach at all.
  {
    double read_ms = 1e30;
    for (int per_sm : {2, 4, 8})
      read_ms = std::min(read_ms, time_ms(20, [&](int i) {
        const uint8_t* base = experts + size_t(i % sets) * kTopK * kExpertBytes;
        cuda::read_all(base, size_t(up_bytes) / 16 * 16, sink, sms * per_sm);
        cuda::read_all(base + size_t(up_bytes), size_t(down_bytes) / 16 * 16, sink, sms * per_sm);
      }));
    report("MXFP4 16 experts' bytes: read kernel, same two launches", up_bytes + down_bytes, read_ms, g_ceiling);
    std::printf("  best MXFP4 / same-bytes read = %.2f\n\n", read_ms / best_step);
  }
  cuda::set_mxfp4_tuning(default_tuning);

  // Prefill: 16 experts × T tokens each, expert-major (grouped GEMM).
  for (int T : {4, 16, 64}) {
    float* X = static_cast<float*>(dev_alloc(sizeof(float) * T * kLatent));
    float* Y = static_cast<float*>(dev_alloc(sizeof(float) * 2 * kTopK * T * kInter));
    fill_floats<<<256, 256>>>(X, size_t(T) * kLatent, 4);
    std::vector<std::vector<cuda::MxTask>> tasks(sets);
    for (int s = 0; s < sets; s++)
      for (int k = 0; k < 2 * kTopK; k++) {
        const Expert e = expert_at(experts + (s * kTopK + k / 2) * kExpertBytes);
        tasks[s].push_back({k % 2 ? e.w3p : e.w1p, k % 2 ? e.w3s : e.w1s, X, Y + size_t(k) * T * kInter, T});
      }
    const double ms = time_ms(5, [&](int i) { cuda::grouped_mxfp4(tasks[i % sets].data(), 2 * kTopK, kInter, kLatent); });
    const double flops = 2.0 * 2 * kTopK * T * double(kInter) * kLatent;
    std::printf("MXFP4 prefill gate+up, 32×(3072×3584) × %2d tokens: %.3f ms, %.1f GFLOP/s, %.1f GB/s of weights\n", T,
                ms, flops / (ms * 1e-3) / 1e9, up_bytes / (ms * 1e-3) / 1e9);
    for (int s = 0; s < sets; s++)
      for (int k = 0; k < 2 * kTopK; k++) tasks[s][k].packed = fup_tasks[s][k].packed, tasks[s][k].scale = fup_tasks[s][k].scale;
    const double fms = time_ms(5, [&](int i) { cuda::grouped_mxfp4_frag(tasks[i % sets].data(), 2 * kTopK, kInter, kLatent); });
    std::printf("MXFP4 prefill gate+up, fragment order,   × %2d tokens: %.3f ms, %.1f GFLOP/s\n", T, fms,
                flops / (fms * 1e-3) / 1e9);
    cudaFree(X);
    cudaFree(Y);
  }
  std::printf("\n");

  // ---- bf16 GEMV at spine shapes
  struct Shape {
    const char* name;
    int rows, cols;
  };
  for (const Shape sh : {Shape{"bf16 7168×7168", 7168, 7168}, Shape{"bf16 33792×7168 (dense FFN)", 33792, 7168},
                         Shape{"bf16 3584×7168 (latent down)", 3584, 7168}, Shape{"bf16 6144×7168 (shared gate)", 6144, 7168}}) {
    const size_t bytes = size_t(sh.rows) * sh.cols * 2;
    const int nbuf = int(std::max<size_t>(2, (size_t(quick ? 400 : 1600) << 20) / bytes));
    uint16_t* W = static_cast<uint16_t*>(dev_alloc(bytes * nbuf));
    fill_bf16<<<1024, 256>>>(W, bytes / 2 * nbuf, 5);
    float* x = static_cast<float*>(dev_alloc(sizeof(float) * sh.cols));
    float* y = static_cast<float*>(dev_alloc(sizeof(float) * sh.rows));
    fill_floats<<<64, 256>>>(x, sh.cols, 6);
    // Consecutive launches on one stream, as a decode step queues them: with
    // programmatic dependent launch (the default) a launch's first weight
    // loads overlap the last one's tail; without it each waits for the last.
    const auto gemv = [&](int i) { cuda::matvec_bf16(W + size_t(i % nbuf) * sh.rows * sh.cols, sh.rows, sh.cols, x, y); };
    cuda::set_pdl(false);
    const double ms_alone = time_ms(20, gemv);
    cuda::set_pdl(true);
    const double ms = time_ms(20, gemv);
    report(std::string(sh.name) + " GEMV, no PDL", double(bytes), ms_alone, g_ceiling);
    report(std::string(sh.name) + " GEMV", double(bytes), ms, g_ceiling);
    // The other decode shapes (same bits), and how long the host takes to
    // queue one launch: a host that cannot stay ahead of the GPU would be
    // timed instead of the kernel.
    const cuda::Bf16Tuning standard = cuda::bf16_tuning();
    for (const cuda::Bf16Tuning t : cuda::bf16_tunings()) {
      if (t.rows == standard.rows && t.ahead == standard.ahead) continue;
      cuda::set_bf16_tuning(t);
      const double ms_t = time_ms(20, gemv);
      report(std::string(sh.name) + " GEMV, " + std::to_string(t.rows) + " rows a block, " + std::to_string(t.ahead) +
                 " ahead",
             double(bytes), ms_t, g_ceiling);
    }
    cuda::set_bf16_tuning(standard);
    {
      ok(cudaDeviceSynchronize(), "sync");
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 20; i++) gemv(i);
      const double host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20;
      ok(cudaDeviceSynchronize(), "sync");
      std::printf("  host time to queue one launch: %.2f us (the GPU's: %.2f us)\n", host_us, ms * 1e3);
    }
    // The read kernel over the same bytes, one launch per matrix as the GEMV:
    // what a launch of this size can reach at all (launch, ramp and tail).
    double read_ms = 1e30;
    for (int per_sm : {2, 4, 8}) {
      const size_t rb = bytes / 16 * 16;
      read_ms = std::min(read_ms, time_ms(20, [&](int i) {
        cuda::read_all(W + size_t(i % nbuf) * sh.rows * sh.cols, rb, sink, sms * per_sm);
      }));
    }
    report(std::string(sh.name) + ": read kernel, same bytes", double(bytes), read_ms, g_ceiling);
    std::printf("  GEMV / same-bytes read = %.2f\n", read_ms / ms);
    cudaFree(W);
    cudaFree(x);
    cudaFree(y);
  }
  std::printf("\n");

  // ---- H2D of experts overlapped with expert GEMVs on another stream
  {
    cudaStream_t copy_s, comp_s;
    ok(cudaStreamCreateWithFlags(&copy_s, cudaStreamNonBlocking), "stream");
    ok(cudaStreamCreateWithFlags(&comp_s, cudaStreamNonBlocking), "stream");
    uint8_t* landing = static_cast<uint8_t*>(dev_alloc(chunks * kExpertBytes));
    cudaEvent_t a, b, c, d;
    for (cudaEvent_t* ev : {&a, &b, &c, &d}) ok(cudaEventCreate(ev), "event");
    const int steps = 40;
    std::vector<double> copy_gbs, comp_gbs;
    for (int rep = 0; rep < 4; rep++) {
      ok(cudaDeviceSynchronize(), "sync");
      ok(cudaEventRecord(a, copy_s), "rec");
      ok(cudaEventRecord(c, comp_s), "rec");
      for (int r = 0; r < 4; r++)
        for (int k = 0; k < chunks; k++)
          ok(cudaMemcpyAsync(landing + k * kExpertBytes, host + k * kExpertBytes, kExpertBytes, cudaMemcpyHostToDevice,
                             copy_s), "h2d");
      for (int i = 0; i < steps; i++) {
        cuda::grouped_mxfp4(up_tasks[i % sets].data(), 2 * kTopK, kInter, kLatent, comp_s);
        cuda::grouped_mxfp4(down_tasks[i % sets].data(), kTopK, kLatent, kInter, comp_s);
      }
      ok(cudaEventRecord(b, copy_s), "rec");
      ok(cudaEventRecord(d, comp_s), "rec");
      ok(cudaDeviceSynchronize(), "sync");
      float tc = 0, tk = 0;
      ok(cudaEventElapsedTime(&tc, a, b), "el");
      ok(cudaEventElapsedTime(&tk, c, d), "el");
      if (rep == 0) continue;
      copy_gbs.push_back(4.0 * chunks * kExpertBytes / (tc * 1e-3) / 1e9);
      comp_gbs.push_back(steps * (up_bytes + down_bytes) / (tk * 1e-3) / 1e9);
    }
    std::sort(copy_gbs.begin(), copy_gbs.end());
    std::sort(comp_gbs.begin(), comp_gbs.end());
    std::printf("overlapped: H2D %.1f GB/s (%.2f of alone) while MXFP4 GEMV %.1f GB/s (%.2f of HBM ceiling)\n",
                copy_gbs[1], copy_gbs[1] / h2d_chunk, comp_gbs[1], comp_gbs[1] / g_ceiling);
    summary.push_back({"overlapped: H2D expert copies", copy_gbs[1], 0});
    summary.push_back({"overlapped: MXFP4 GEMV (default tuning)", comp_gbs[1], comp_gbs[1] / g_ceiling});
    cudaFree(landing);
  }

  // ---- The host tier: one decode step's 16 experts in host RAM, copied in
  // chunks on the uploader's stream while the GEMVs of the experts already
  // landed run on another; step bytes / step time against the pinned H2D
  // ceiling of this run (the 16 expert-sized copies alone).
  {
    cudaStream_t comp_s;
    ok(cudaStreamCreateWithFlags(&comp_s, cudaStreamNonBlocking), "stream");
    uint8_t* slots = static_cast<uint8_t*>(dev_alloc(kTopK * kExpertBytes));
    std::vector<uint8_t> pageable(size_t(kTopK) * kExpertBytes);
    for (size_t i = 0; i < pageable.size(); i += 64) pageable[i] = uint8_t(i * 7);
    std::memcpy(host, pageable.data(), std::min(pageable.size(), h2d_bytes));  // pinned copy of the same bytes
    const double step_bytes = double(kTopK) * kExpertBytes;
    cudaEvent_t a, b;
    ok(cudaEventCreate(&a), "event");
    ok(cudaEventCreate(&b), "event");
    for (const bool pinned : {true, false})
      for (const size_t chunk : {size_t(2) << 20, size_t(8) << 20}) {
        if (!pinned && chunk != (size_t(8) << 20)) continue;
        if (pinned && size_t(kTopK) * kExpertBytes > h2d_bytes) continue;
        cuda::Uploader up(chunk, 3);
        std::vector<double> ms;
        for (int rep = 0; rep < 6; rep++) {
          ok(cudaDeviceSynchronize(), "sync");
          ok(cudaEventRecord(a, static_cast<cudaStream_t>(up.stream())), "rec");
          for (int k = 0; k < kTopK; k++) {
            uint8_t* slot = slots + size_t(k) * kExpertBytes;
            up.copy(slot, (pinned ? host : pageable.data()) + size_t(k) * kExpertBytes, kExpertBytes, pinned);
            up.fence(comp_s);
            const Expert e = expert_at(slot);
            const cuda::MxTask ut[2] = {{e.w1p, e.w1s, lat, g + k * kInter, 1}, {e.w3p, e.w3s, lat, u + k * kInter, 1}};
            const cuda::MxTask dt = {e.w2p, e.w2s, h + k * kInter, o + k * kLatent, 1};
            cuda::grouped_mxfp4(ut, 2, kInter, kLatent, comp_s);
            cuda::grouped_mxfp4(&dt, 1, kLatent, kInter, comp_s);
          }
          ok(cudaEventRecord(b, comp_s), "rec");
          ok(cudaEventSynchronize(b), "sync");
          float t = 0;
          ok(cudaEventElapsedTime(&t, a, b), "el");
          if (rep > 0) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double gbs = step_bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
        char what[160];
        std::snprintf(what, sizeof what, "host tier step, 16 experts from %s RAM, %zu MiB chunks",
                      pinned ? "pinned" : "pageable (staged)", chunk >> 20);
        std::printf("%-62s %8.3f ms %8.1f GB/s  %.2f of pinned H2D\n", what, ms[ms.size() / 2], gbs, gbs / h2d_chunk);
        summary.push_back({what, gbs, gbs / h2d_chunk});
      }
    cudaFree(slots);
  }

  // ---- Sequence-state ops at K3's shapes: the KDA recurrence of one decode
  // token (96 heads × 128², 6.3 MB of state, read and written), rotating over
  // 16 layers' states (past L2), against the host loop (kda::recur, one
  // thread); MLA's latent sums (64 heads, kv_lora 512 + rope 64) over 4096
  // cached positions. Bytes: the least each must move (state read + written;
  // the cache read by scores and by the mix, the key half of kv_b once).
  {
    const int NH = 96, D = 128, C = NH * D, layers = 16;
    const size_t nS = size_t(NH) * D * D;
    float* S = static_cast<float*>(dev_alloc(layers * nS * sizeof(float)));
    random_bytes(S, layers * nS * sizeof(float), 30, 0x30, 0x08);  // floats of modest size
    std::vector<float> hq(C), hk(C), hv(C), hd(C), hb(NH);
    std::mt19937 rng(31);
    std::uniform_real_distribution<float> u01(0.0f, 1.0f), sym(-0.1f, 0.1f);
    for (int i = 0; i < C; i++) hq[i] = sym(rng), hk[i] = sym(rng), hv[i] = sym(rng), hd[i] = u01(rng);
    for (float& x : hb) x = u01(rng);
    float* in = static_cast<float*>(dev_alloc((5 * size_t(C)) * sizeof(float)));
    ok(cudaMemcpy(in, hq.data(), C * 4, cudaMemcpyHostToDevice), "h2d");
    ok(cudaMemcpy(in + C, hk.data(), C * 4, cudaMemcpyHostToDevice), "h2d");
    ok(cudaMemcpy(in + 2 * C, hv.data(), C * 4, cudaMemcpyHostToDevice), "h2d");
    ok(cudaMemcpy(in + 3 * C, hd.data(), C * 4, cudaMemcpyHostToDevice), "h2d");
    ok(cudaMemcpy(in + 4 * C, hb.data(), NH * 4, cudaMemcpyHostToDevice), "h2d");
    float* o = in + 4 * C + NH;
    const double ms = time_ms(layers, [&](int i) {
      float* Si = S + size_t(i % layers) * nS;
      cuda::kda_recur(NH, D, 1, Si, Si, in, in + C, in + 2 * C, in + 3 * C, in + 4 * C, o);
    });
    report("KDA recurrence, K3 (96 x 128^2), one token", 2.0 * nS * 4, ms, g_ceiling);
    std::vector<float> hS(nS), err(D), ho(C);
    for (size_t i = 0; i < nS; i++) hS[i] = sym(rng);
    std::vector<double> host_ms;
    for (int rep = 0; rep < 5; rep++) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int h = 0; h < NH; h++) {
        const size_t hd0 = size_t(h) * D;
        kda::recur(D, hS.data() + hd0 * D, hS.data() + hd0 * D, hq.data() + hd0, hk.data() + hd0, hv.data() + hd0,
                   hd.data() + hd0, hb[h], err.data(), ho.data() + hd0);
      }
      host_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(host_ms.begin(), host_ms.end());
    std::printf("  the same on the host (kda::recur, one thread): %.3f ms, %.1fx the GPU's\n", host_ms[2],
                host_ms[2] / ms);
    cudaFree(in);
    cudaFree(S);

    const int MH = 64, NOPE = 128, ROPE = 64, VD = 128, KVL = 512, KVW = KVL + ROPE, N = 4096;
    const size_t kvb = size_t(MH) * (NOPE + VD) * KVL;
    uint16_t* kv_b = static_cast<uint16_t*>(dev_alloc(kvb * 2));
    random_bytes(kv_b, kvb * 2, 32, 0x30, 0x08);
    float* cache = static_cast<float*>(dev_alloc(size_t(N) * KVW * 4));
    random_bytes(cache, size_t(N) * KVW * 4, 33, 0x30, 0x08);
    float* qm = static_cast<float*>(dev_alloc(size_t(MH) * (NOPE + ROPE) * 4));
    random_bytes(qm, size_t(MH) * (NOPE + ROPE) * 4, 34, 0x30, 0x08);
    float* qhat = static_cast<float*>(dev_alloc(size_t(MH) * KVW * 4));
    float* score = static_cast<float*>(dev_alloc(size_t(MH) * N * 4));
    float* chat = static_cast<float*>(dev_alloc(size_t(MH) * KVL * 4));
    const double qms = time_ms(8, [&](int) { cuda::mla_qhat(kv_b, MH, NOPE, VD, KVL, ROPE, 1, qm, qhat); });
    const double sms_ = time_ms(8, [&](int) {
      cuda::mla_scores(MH, KVL, ROPE, N - 1, 1, qhat, cache, 0.07f, score);
    });
    ok(cudaMemset(score, 0, size_t(MH) * N * 4), "memset");  // any weights: timing only
    const double mms = time_ms(8, [&](int) { cuda::mla_mix(MH, KVL, ROPE, N - 1, 1, score, cache, chat); });
    report("MLA q-hat (K3: 64 heads x 128 x 512)", double(MH) * NOPE * KVL * 2, qms, g_ceiling);
    report("MLA scores over 4096 positions", double(N) * KVW * 4, sms_, g_ceiling);
    report("MLA mix over 4096 positions", double(N) * KVW * 4, mms, g_ceiling);
    cudaFree(kv_b);
    cudaFree(cache);
    cudaFree(qm);
    cudaFree(qhat);
    cudaFree(score);
    cudaFree(chat);
  }

  std::printf("\n%-62s %10s %8s\n", "summary", "GB/s", "fraction");
  for (const Row& r : summary) std::printf("%-62s %10.1f %8.2f\n", r.what.c_str(), r.gbs, r.frac);
  cudaFreeHost(host);
  cudaFree(experts);
  cudaFree(frag);
  cudaFree(act);
  cudaFree(sink);
  ok(cudaDeviceSynchronize(), "final sync");
  return 0;
}
