#include "kernels/rate_probe.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/clock.h"
#include "base/stats.h"
#include "kernels/bf16_codec.h"
#include "kernels/fast.h"
#include "kernels/ref.h"
#include "kernels/threads.h"

namespace sluice::kernels {

namespace {

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Bytes per second of `bytes_per_call`, repeating f(copy) for about `seconds`
// (after one warm-up pass over the copies if asked), cycling through `copies` copies of the
// weights so that no call finds its matrix in the last-level cache.
template <class F>
double rate(double bytes_per_call, int copies, double seconds, bool cpu, const F& f, bool warm_up) {
  double (*now_s)() = cpu ? thread_cpu_s : steady_s;
  if (warm_up)
    for (int i = 0; i < copies; i++) f(i);
  int calls = 0;
  const double t0 = now_s();
  double t = t0;
  do {
    f(calls % copies);
    calls++;
    t = now_s();
  } while (t - t0 < seconds);
  return bytes_per_call * calls / (t - t0);
}

// How many copies of a `bytes` matrix make a working set of bytes_beyond_cache().
int copies_beyond_cache(size_t bytes) {
  return std::max(1, int(std::ceil(double(bytes_beyond_cache()) / double(bytes))));
}

// Trained-like bf16 weights: Gaussian, sigma 0.02 (what the codec's ratio and speed are quoted on).
std::vector<uint16_t> gaussian_bf16(size_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<uint16_t> w(n);
  for (uint16_t& v : w) {
    const float f = d(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    v = uint16_t(u >> 16);
  }
  return w;
}

}  // namespace

size_t bytes_beyond_cache() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const double want = std::min(double(1u << 30), std::max(double(256u << 20), 4.0 * double(std::max(l3, 0L))));
  return size_t(want);
}

double measure_copy_gbps(double seconds) {
  constexpr size_t kBlock = size_t(8) << 20;
  const int copies = copies_beyond_cache(kBlock);
  std::vector<uint8_t> from(kBlock * size_t(copies), 1), to(kBlock);
  for (size_t i = 0; i < from.size(); i += 4096) from[i] = uint8_t(i >> 12);
  const double r = rate(double(kBlock), copies, std::max(seconds, 0.02), false,
                        [&](int i) { std::memcpy(to.data(), from.data() + size_t(i) * kBlock, kBlock); }, true);
  volatile uint8_t sink = to[kBlock - 1];  // the copies' bytes are read: they are not elided
  (void)sink;
  return r / 1e9;
}

KernelRates measure_kernel_rates(int threads, double seconds, int rounds) {
  const int before = num_threads();
  if (threads > 0) set_num_threads(threads);
  const bool cpu = num_threads() == 1;  // one thread: its own CPU time, whatever else runs
  KernelRates r;
  r.threads = num_threads();
  r.kernels = fast::isa_name(fast::isa());
  r.rounds = std::max(rounds, 1);
  const double each = std::max(seconds, 0.04) / 4 / r.rounds;
  constexpr uint32_t kBlock = 1u << 16;
  const int blocks = 64;
  const std::vector<uint16_t> gauss = gaussian_bf16(size_t(kBlock) * blocks);
  // Each kernel's weights and one timed call over copy i of them. All four
  // are set up first, then timed in interleaved rounds.
  struct Kernel {
    double bytes = 0;  // weight bytes per call
    int copies = 1;
    std::function<void(int)> call;
    std::vector<double> gbps;  // one per round
  };
  std::array<Kernel, 4> k;  // bf16, int8, MXFP4, decode (KernelRates' order)
  // bf16: a 64 MiB matrix (K3's hidden width), well beyond any cache; its
  // values do not matter to the matvec, so the Gaussian values are tiled.
  const int rows = 4680, cols = 7168;
  const size_t n16 = size_t(rows) * cols;
  k[0].copies = copies_beyond_cache(n16 * 2);
  std::vector<uint16_t> w16(n16 * size_t(k[0].copies));
  for (size_t at = 0; at < w16.size(); at += gauss.size())
    std::memcpy(w16.data() + at, gauss.data(), std::min(gauss.size(), w16.size() - at) * 2);
  std::vector<float> x(static_cast<size_t>(cols), 0.5f), y(static_cast<size_t>(rows));
  k[0].bytes = double(n16) * 2;
  k[0].call = [&](int i) { fast::matvec_bf16(w16.data() + n16 * size_t(i), rows, cols, x.data(), y.data()); };
  // int8: the same shape as the bf16 matrix (half its bytes); random codes,
  // and normal scales as trained weights have (a denormal scale would cost a
  // microcode assist per group that real packs never pay).
  const size_t n8 = size_t(rows) * ref::int8_row_bytes(cols);
  k[1].copies = copies_beyond_cache(n8);
  std::vector<uint8_t> w8(n8 * size_t(k[1].copies));
  {
    std::mt19937 rng(8);
    for (size_t i = 0; i < n8; i++) w8[i] = uint8_t(rng());
    const float scale = 1e-4f;
    for (int row = 0; row < rows; row++)
      for (int g = 0; g < ref::int8_groups(cols); g++)
        std::memcpy(w8.data() + size_t(row) * ref::int8_row_bytes(cols) + 4 * size_t(g), &scale, 4);
    for (int i = 1; i < k[1].copies; i++) std::memcpy(w8.data() + n8 * size_t(i), w8.data(), n8);
  }
  k[1].bytes = double(n8);
  k[1].call = [&](int i) { fast::matvec_int8(w8.data() + n8 * size_t(i), rows, cols, x.data(), y.data()); };
  // MXFP4: four experts' w1 at K3's shape (3072 x 3584 each), 23 MB with scales.
  const int erows = 4 * 3072, ecols = 3584;
  const size_t np = size_t(erows) * ecols / 2, ns = size_t(erows) * ecols / 32;
  k[2].copies = copies_beyond_cache(np + ns);
  std::vector<uint8_t> packed(np * size_t(k[2].copies)), scale(ns * size_t(k[2].copies));
  {
    std::mt19937 rng(9);
    for (size_t i = 0; i < np; i++) packed[i] = uint8_t(rng());
    for (size_t i = 0; i < ns; i++) scale[i] = uint8_t(120 + rng() % 8);
    for (int i = 1; i < k[2].copies; i++) {
      std::memcpy(packed.data() + np * size_t(i), packed.data(), np);
      std::memcpy(scale.data() + ns * size_t(i), scale.data(), ns);
    }
  }
  std::vector<float> ex(static_cast<size_t>(ecols), 0.5f), ey(static_cast<size_t>(erows));
  k[2].bytes = double(np + ns);
  k[2].call = [&](int i) {
    fast::matvec_mxfp4(packed.data() + np * size_t(i), scale.data() + ns * size_t(i), erows, ecols, ex.data(), ey.data());
  };
  // Lossless decode: 64K-value blocks (a pack's), one per pool chunk, as the
  // spine decodes a piece. One copy: decoding runs at ~2 GB/s per core, far
  // below RAM's rate, so the cache hardly matters.
  std::vector<uint8_t> enc;
  std::vector<size_t> at;
  for (int b = 0; b < blocks; b++) {
    at.push_back(enc.size());
    codec::encode_block(gauss.data() + size_t(b) * kBlock, kBlock, enc);
  }
  at.push_back(enc.size());
  std::vector<uint16_t> out(gauss.size());
  k[3].bytes = double(gauss.size()) * 2;
  k[3].call = [&](int) {
    parallel_for(blocks, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; b++)
        codec::decode(enc.data() + at[size_t(b)], at[size_t(b) + 1] - at[size_t(b)], out.data() + size_t(b) * kBlock,
                      kBlock, "rate probe");
    });
  };
  // Interleaved rounds, each kernel in each: a burst of load from elsewhere
  // on a shared machine lands in one round of one kernel, and the median
  // leaves it out (one long sample per kernel took it whole: 0.87-1.71 of a
  // step's measured compute across sittings, docs/benchmarks.md).
  for (int round = 0; round < r.rounds; round++)
    for (Kernel& kk : k) kk.gbps.push_back(rate(kk.bytes, kk.copies, each, cpu, kk.call, round == 0) / 1e9);
  double* med[4] = {&r.bf16_gbps, &r.int8_gbps, &r.mxfp4_gbps, &r.decode_gbps};
  for (size_t i = 0; i < k.size(); i++) {
    *med[i] = median(k[i].gbps);
    const auto [lo, hi] = std::minmax_element(k[i].gbps.begin(), k[i].gbps.end());
    r.spread = std::max(r.spread, *hi / *lo);
  }
  set_num_threads(before);
  return r;
}

}  // namespace sluice::kernels
