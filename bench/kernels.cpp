// bench/kernels.cpp — microbenchmark of the fast.h kernels (build/bench_kernels).
//
// Reports GB/s of weight bytes for the matrix-vector products next to a
// read-bandwidth ceiling measured in the same run (a streaming AVX2 read of
// the same weight bytes on the same threads), and GFLOP/s for the
// matrix-matrix products. Not a test: numbers depend on the machine.
//
// Times are CPU time, not wall time, where the machine may be shared: matvec
// bandwidths use each thread's own CPU clock (see measure), the rest uses
// process CPU time / threads. On an idle machine these equal wall time; on a
// shared one they leave out time our threads sat preempted. Wall-clock
// figures are printed beside the matvec ones.
//
//   bench_kernels [--threads N] [--reps N] [--quick]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/numeric.h"
#include "io/aligned_buffer.h"
#include "kernels/fast.h"
#include "kernels/ref.h"
#include "kernels/threads.h"

using namespace sluice;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}



// Best seconds over `reps` runs of f (after one warm-up run): by wall clock,
// and by process CPU time / threads (see the top of the file).
struct Timing {
  double best, best_wall;
};
Timing time_it(int reps, const std::function<void()>& f) {
  f();
  const double nthreads = kernels::num_threads();
  Timing t{1e30, 1e30};
  for (int i = 0; i < reps; i++) {
    double w0 = now_s(), c0 = cpu_s();
    f();
    t.best_wall = std::min(t.best_wall, now_s() - w0);
    t.best = std::min(t.best, (cpu_s() - c0) / nthreads);
  }
  return t;
}

uint64_t g_sink = 0;

// Streaming read of [p, p+n): four independent 256-bit accumulators.
__attribute__((target("avx2"))) uint64_t read_bytes(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  uint64_t tail = 0;
  for (; i < n; i++) tail += p[i];
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
  return out[0] + out[1] + out[2] + out[3] + tail;
}

struct Span {
  const void* p;
  size_t bytes;
};

// A parallel streaming read of every span, each split over the threads like a
// matvec splits its rows: the read-bandwidth ceiling for those same bytes.
void read_spans(const std::vector<Span>& spans) {
  const size_t piece = 64 << 10;
  for (const Span& s : spans) {
    const auto* base = static_cast<const uint8_t*>(s.p);
    kernels::parallel_for(int64_t((s.bytes + piece - 1) / piece), [&](int64_t b, int64_t e) {
      size_t begin = size_t(b) * piece, end = std::min(s.bytes, size_t(e) * piece);
      uint64_t sum = read_bytes(base + begin, end - begin);
      __atomic_fetch_add(&g_sink, sum, __ATOMIC_RELAXED);
    });
  }
}

// part(i, k): some work on the i-th of k shares (e.g. row ranges).
using Part = std::function<void(int, int)>;

// Runs the k shares of `part` on the pool, one per thread, and returns the
// CPU time of the slowest (preemption left out).
double slowest_thread_s(const Part& part) {
  const int k = kernels::num_threads();
  std::vector<double> cpu(k, 0.0);
  kernels::parallel_for(k, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) {
      double c0 = thread_cpu_s();
      part(int(i), k);
      cpu[i] = thread_cpu_s() - c0;
    }
  });
  return *std::max_element(cpu.begin(), cpu.end());
}

double best_slowest_thread_s(int reps, const Part& part) {
  part(0, 1);  // warm-up
  double best = 1e30;
  for (int i = 0; i < reps; i++) best = std::min(best, slowest_thread_s(part));
  return best;
}

std::pair<int, int> row_range(int rows, int i, int parts) {
  int r0 = rows / parts * i, r1 = i + 1 == parts ? rows : rows / parts * (i + 1);
  return {r0, r1};
}

struct Lcg {
  uint64_t s;
  uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(s >> 33);
  }
  float uniform() { return float(next()) / 2147483648.0f - 1.0f; }  // [-1, 1)
};

void* alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) {
    std::fprintf(stderr, "bench_kernels: out of memory (%zu bytes)\n", bytes);
    std::exit(1);
  }
  return p;
}

std::vector<float> random_x(Lcg& rng, size_t n) {
  std::vector<float> x(n);
  for (float& v : x) v = rng.uniform();
  return x;
}

struct Bf16Matrix {
  uint16_t* w;
  int rows, cols;
  size_t bytes() const { return size_t(rows) * cols * 2; }
};
Bf16Matrix make_bf16(Lcg& rng, int rows, int cols) {
  Bf16Matrix m{static_cast<uint16_t*>(alloc(size_t(rows) * cols * 2)), rows, cols};
  for (size_t i = 0; i < size_t(rows) * cols; i++) m.w[i] = f32_to_bf16(rng.uniform() * 0.05f);
  return m;
}

struct MxMatrix {
  uint8_t *packed, *scale;
  int rows, cols;
  size_t bytes() const { return size_t(rows) * cols / 2 + size_t(rows) * cols / 32; }
};
MxMatrix make_mx(Lcg& rng, int rows, int cols) {
  MxMatrix m{static_cast<uint8_t*>(alloc(size_t(rows) * cols / 2)),
             static_cast<uint8_t*>(alloc(size_t(rows) * cols / 32)), rows, cols};
  for (size_t i = 0; i < size_t(rows) * cols / 2; i++) m.packed[i] = uint8_t(rng.next());
  for (size_t i = 0; i < size_t(rows) * cols / 32; i++) m.scale[i] = uint8_t(118 + rng.next() % 10);
  return m;
}

// int8 rows (kernels/ref.h): per-group fp32 scales, then the codes.
struct Int8Matrix {
  uint8_t* w;
  int rows, cols;
  size_t bytes() const { return size_t(rows) * ref::int8_row_bytes(cols); }
};
Int8Matrix make_int8(Lcg& rng, int rows, int cols) {
  Int8Matrix m{nullptr, rows, cols};
  m.w = static_cast<uint8_t*>(alloc(m.bytes()));
  for (size_t i = 0; i < m.bytes(); i++) m.w[i] = uint8_t(rng.next());
  for (int r = 0; r < rows; r++)
    for (int g = 0; g < ref::int8_groups(cols); g++) {
      const float sc = 1e-3f * (1.0f + rng.uniform());
      std::memcpy(m.w + size_t(r) * ref::int8_row_bytes(cols) + 4 * size_t(g), &sc, 4);
    }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 15;
  bool quick = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--quick")
      quick = true;
    else {
      std::fprintf(stderr, "usage: bench_kernels [--threads N] [--reps N] [--quick]\n");
      return 2;
    }
  }
  if (quick) reps = std::min(reps, 5);
  if (!__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "bench_kernels: needs AVX2\n");
    return 1;
  }
  kernels::set_num_threads(threads);
  std::printf("kernels: %s, %d threads\n\n", fast::isa_name(fast::isa()), kernels::num_threads());
  Lcg rng{42};

  // ---- The ceiling for each matvec is a streaming read of the same weight
  // bytes, split over the same threads, measured right before every
  // repetition of the kernel (interleaved), so a machine shared with other
  // work slows both alike. Each thread's share is timed by its own CPU clock
  // (the slowest thread counts), which leaves out time spent preempted; the
  // whole call through the public API is also timed by the wall clock.
  // Ratio = best kernel / best ceiling over the same period.
  struct Result {
    double kernel_gbs = 0, ceiling_gbs = 0;            // per-thread CPU time
    double kernel_wall_gbs = 0, ceiling_wall_gbs = 0;  // wall clock
  };
  // part(i, k): the kernel on the i-th of k row ranges; api(): the whole call.
  auto measure = [&](const std::vector<Span>& spans, int nreps, const Part& part,
                     const std::function<void()>& api) {
    double bytes = 0;
    for (const Span& s : spans) bytes += double(s.bytes);
    auto read_part = [&](int i, int parts) {
      for (const Span& s : spans) {
        size_t b = s.bytes / parts * i, e = i + 1 == parts ? s.bytes : s.bytes / parts * (i + 1);
        __atomic_fetch_add(&g_sink, read_bytes(static_cast<const uint8_t*>(s.p) + b, e - b),
                           __ATOMIC_RELAXED);
      }
    };
    api();
    Result r;
    for (int i = 0; i < nreps; i++) {
      r.ceiling_gbs = std::max(r.ceiling_gbs, bytes / slowest_thread_s(read_part) / 1e9);
      r.kernel_gbs = std::max(r.kernel_gbs, bytes / slowest_thread_s(part) / 1e9);
      double t0 = now_s();
      read_spans(spans);
      r.ceiling_wall_gbs = std::max(r.ceiling_wall_gbs, bytes / (now_s() - t0) / 1e9);
      t0 = now_s();
      api();
      r.kernel_wall_gbs = std::max(r.kernel_wall_gbs, bytes / (now_s() - t0) / 1e9);
    }
    return r;
  };
  auto report = [](const char* what, Result r) {
    std::printf("%-42s %5.1f GB/s  ceiling %5.1f  ratio %.2f   (wall: %5.1f / %5.1f = %.2f)\n", what,
                r.kernel_gbs, r.ceiling_gbs, r.kernel_gbs / r.ceiling_gbs, r.kernel_wall_gbs,
                r.ceiling_wall_gbs, r.kernel_wall_gbs / r.ceiling_wall_gbs);
  };
  auto bf16_part = [&](const Bf16Matrix& m, const float* xv, float* yv) {
    return [&m, xv, yv](int i, int parts) {
      auto [r0, r1] = row_range(m.rows, i, parts);
      fast::matvec_bf16(m.w + size_t(r0) * m.cols, r1 - r0, m.cols, xv, yv + r0);
    };
  };

  std::printf("-- matvec, weights from memory (GB/s of weight bytes, best of %d)\n", reps);
  Bf16Matrix big = make_bf16(rng, 7168, 7168);
  auto x = random_x(rng, 33792);
  std::vector<float> y(33792 * 64);
  for (int t : {1, threads}) {
    kernels::set_num_threads(t);
    Result r = measure({{big.w, big.bytes()}}, reps, bf16_part(big, x.data(), y.data()),
                       [&] { fast::matvec_bf16(big.w, big.rows, big.cols, x.data(), y.data()); });
    char name[96];
    std::snprintf(name, sizeof name, "bf16 7168x7168 (98 MB), %d thread%s", t, t > 1 ? "s" : "");
    report(name, r);
  }
  // The same shape in copies past any cache (this Zen 5 VM reports a 512 MB
  // L3, and 98 MB read again is partly cache-resident there: a ceiling of 86
  // GB/s against ~55 from DRAM), on huge pages as the engine's spine is
  // (io/aligned_buffer.h): what a decode step's resident spine sees.
  {
    const size_t copies = std::max<size_t>(8, (size_t(1) << 30) * 3 / 2 / big.bytes());
    AlignedBuffer set(copies * big.bytes());
    for (size_t k = 0; k < copies; k++) std::memcpy(set.data() + k * big.bytes(), big.w, big.bytes());
    std::vector<Bf16Matrix> mats;
    for (size_t k = 0; k < copies; k++)
      mats.push_back({reinterpret_cast<uint16_t*>(set.data() + k * big.bytes()), big.rows, big.cols});
    auto all = [&](int i, int parts) {
      for (const Bf16Matrix& m : mats) bf16_part(m, x.data(), y.data())(i, parts);
    };
    for (int t : {1, threads}) {
      kernels::set_num_threads(t);
      Result r = measure({{set.data(), set.size()}}, std::min(reps, 3), all, [&] {
        for (const Bf16Matrix& m : mats) fast::matvec_bf16(m.w, m.rows, m.cols, x.data(), y.data());
      });
      char name[96];
      std::snprintf(name, sizeof name, "bf16 7168x7168 x%zu (%.1f GB), %d thread%s", copies,
                    double(set.size()) / 1e9, t, t > 1 ? "s" : "");
      report(name, r);
    }
  }
  // int8 spine (pack/int8.h): the same shape, 1.02 bytes per weight.
  auto int8_part = [&](const Int8Matrix& m, const float* xv, float* yv) {
    return [&m, xv, yv](int i, int parts) {
      auto [r0, r1] = row_range(m.rows, i, parts);
      fast::matvec_int8(m.w + size_t(r0) * ref::int8_row_bytes(m.cols), r1 - r0, m.cols, xv, yv + r0);
    };
  };
  // 53 MB is partly L3-resident on a 32 MB L3 (a high ceiling); 14336 rows
  // (106 MB, the size of bf16's 7168x7168) come from memory.
  Int8Matrix big8 = make_int8(rng, 7168, 7168), tall8 = make_int8(rng, 14336, 7168);
  for (const Int8Matrix* m8 : {&big8, &tall8}) {
    for (int t : {1, threads}) {
      kernels::set_num_threads(t);
      Result r = measure({{m8->w, m8->bytes()}}, reps, int8_part(*m8, x.data(), y.data()),
                         [&] { fast::matvec_int8(m8->w, m8->rows, m8->cols, x.data(), y.data()); });
      char name[96];
      std::snprintf(name, sizeof name, "int8 %dx7168 (%.0f MB), %d thread%s", m8->rows, double(m8->bytes()) / 1e6, t,
                    t > 1 ? "s" : "");
      report(name, r);
    }
  }
  std::free(tall8.w);
  kernels::set_num_threads(threads);
  if (!quick) {
    Int8Matrix m = make_int8(rng, 33792, 7168);
    report("int8 33792x7168 (dense-FFN gate)", measure({{m.w, m.bytes()}}, reps, int8_part(m, x.data(), y.data()),
                                                       [&] { fast::matvec_int8(m.w, m.rows, m.cols, x.data(), y.data()); }));
    std::free(m.w);
  }
  if (!quick) {
    struct Shape {
      int rows, cols;
      const char* name;
    };
    for (Shape s : {Shape{6144, 7168, "bf16 6144x7168 (shared-expert gate)"},
                    Shape{7168, 6144, "bf16 7168x6144 (shared-expert down)"},
                    Shape{33792, 7168, "bf16 33792x7168 (dense-FFN gate)"}}) {
      Bf16Matrix m = make_bf16(rng, s.rows, s.cols);
      report(s.name, measure({{m.w, m.bytes()}}, reps, bf16_part(m, x.data(), y.data()),
                             [&] { fast::matvec_bf16(m.w, m.rows, m.cols, x.data(), y.data()); }));
      std::free(m.w);
    }
  }

  // MXFP4 experts: w1 3072x3584, w3 3072x3584, w2 3584x3072 (17.5 MB per
  // expert); a run cycles through 16 experts (281 MB), as decode does.
  const int n_experts = quick ? 6 : 16;
  std::vector<MxMatrix> w1, w2, w3;
  for (int e = 0; e < n_experts; e++) {
    w1.push_back(make_mx(rng, 3072, 3584));
    w2.push_back(make_mx(rng, 3584, 3072));
    w3.push_back(make_mx(rng, 3072, 3584));
  }
  std::vector<float> h(3584), g(3072), u(3072);
  for (int i = 0; i < 3584; i++) h[i] = rng.uniform();
  std::vector<Span> expert_spans;
  for (int e = 0; e < n_experts; e++)
    for (const MxMatrix* m : {&w1[e], &w3[e], &w2[e]}) {
      expert_spans.push_back({m->packed, size_t(m->rows) * m->cols / 2});
      expert_spans.push_back({m->scale, size_t(m->rows) * m->cols / 32});
    }
  auto mx_rows = [&](const MxMatrix& m, const float* xv, float* yv, int i, int parts) {
    auto [r0, r1] = row_range(m.rows, i, parts);
    fast::matvec_mxfp4(m.packed + size_t(r0) * m.cols / 2, m.scale + size_t(r0) * m.cols / 32, r1 - r0,
                       m.cols, xv, yv + r0);
  };
  for (int t : {1, threads}) {
    kernels::set_num_threads(t);
    // (Per part, w2 reads this part's g rows only; the numbers do not matter.)
    Result r = measure(
        expert_spans, reps,
        [&](int i, int parts) {
          for (int e = 0; e < n_experts; e++) {
            mx_rows(w1[e], h.data(), g.data(), i, parts);
            mx_rows(w3[e], h.data(), u.data(), i, parts);
            mx_rows(w2[e], g.data(), h.data(), i, parts);
          }
        },
        [&] {
          for (int e = 0; e < n_experts; e++) {
            fast::matvec_mxfp4(w1[e].packed, w1[e].scale, 3072, 3584, h.data(), g.data());
            fast::matvec_mxfp4(w3[e].packed, w3[e].scale, 3072, 3584, h.data(), u.data());
            fast::matvec_mxfp4(w2[e].packed, w2[e].scale, 3584, 3072, g.data(), h.data());
          }
        });
    char name[96];
    std::snprintf(name, sizeof name, "mxfp4 %d experts w1,w3,w2, %d thread%s", n_experts, t, t > 1 ? "s" : "");
    report(name, r);
  }
  kernels::set_num_threads(threads);

  // In cache: the kernels' own speed (decode + FMA), no memory limit.
  std::printf("\n-- matvec, weights in cache (compute speed, %d threads)\n", threads);
  {
    Bf16Matrix small = make_bf16(rng, 256, 1024);
    double t = best_slowest_thread_s(reps * 20, bf16_part(small, x.data(), y.data()));
    std::printf("bf16 256x1024 (512 KB)                     %5.1f GB/s\n", small.bytes() / t / 1e9);
    std::free(small.w);
    Int8Matrix s8 = make_int8(rng, 512, 1024);
    t = best_slowest_thread_s(reps * 20, int8_part(s8, x.data(), y.data()));
    std::printf("int8 512x1024 (520 KB)                     %5.1f GB/s\n", s8.bytes() / t / 1e9);
    std::free(s8.w);
    MxMatrix m = make_mx(rng, 512, 2048);
    t = best_slowest_thread_s(reps * 20, [&](int i, int parts) { mx_rows(m, x.data(), y.data(), i, parts); });
    std::printf("mxfp4 512x2048 (544 KB)                    %5.1f GB/s\n", m.bytes() / t / 1e9);
    std::free(m.packed);
    std::free(m.scale);
  }

  // ---- matmul: the weight is read once for all n tokens; compute-bound.
  std::printf("\n-- matmul, %d threads (GFLOP/s = 2*rows*cols*n / time; x = speed-up over n matvecs)\n",
              threads);
  std::vector<float> X = random_x(rng, size_t(64) * 7168);
  std::vector<std::vector<float>> Yparts(threads, std::vector<float>(size_t(64) * 7168));
  auto bf16_mm = [&](int n) {
    return [&, n](int i, int parts) {
      auto [r0, r1] = row_range(big.rows, i, parts);
      fast::matmul_bf16(big.w + size_t(r0) * big.cols, r1 - r0, big.cols, X.data(), n, Yparts[i].data());
    };
  };
  const MxMatrix& mx = w1[1];
  auto mx_mm = [&](int n) {
    return [&, n](int i, int parts) {
      auto [r0, r1] = row_range(mx.rows, i, parts);
      fast::matmul_mxfp4(mx.packed + size_t(r0) * mx.cols / 2, mx.scale + size_t(r0) * mx.cols / 32, r1 - r0,
                         mx.cols, X.data(), n, Yparts[i].data());
    };
  };
  double mv = best_slowest_thread_s(reps, bf16_part(big, x.data(), y.data()));
  for (int n : {2, 4, 8, 16, 32, 64}) {
    if (quick && n > 16) break;
    double t = best_slowest_thread_s(std::max(3, reps / 3), bf16_mm(n));
    std::printf("bf16 matmul 7168x7168 (from memory), n=%-3d %7.1f ms  %6.1f GFLOP/s  %4.1fx\n", n, t * 1e3,
                2.0 * big.rows * big.cols * n / t / 1e9, mv * n / t);
  }
  auto int8_mm = [&](int n) {
    return [&, n](int i, int parts) {
      auto [r0, r1] = row_range(big8.rows, i, parts);
      fast::matmul_int8(big8.w + size_t(r0) * ref::int8_row_bytes(big8.cols), r1 - r0, big8.cols, X.data(), n,
                        Yparts[i].data());
    };
  };
  mv = best_slowest_thread_s(reps, int8_part(big8, x.data(), y.data()));
  for (int n : {2, 4, 8, 16, 32, 64}) {
    if (quick && n > 16) break;
    double t = best_slowest_thread_s(std::max(3, reps / 3), int8_mm(n));
    std::printf("int8 matmul 7168x7168 (from memory), n=%-3d %7.1f ms  %6.1f GFLOP/s  %4.1fx\n", n, t * 1e3,
                2.0 * big8.rows * big8.cols * n / t / 1e9, mv * n / t);
  }
  mv = best_slowest_thread_s(reps, [&](int i, int parts) { mx_rows(mx, h.data(), g.data(), i, parts); });
  for (int n : {2, 4, 8, 16, 32, 64}) {
    if (quick && n > 16) break;
    double t = best_slowest_thread_s(std::max(3, reps / 3), mx_mm(n));
    std::printf("mxfp4 matmul 3072x3584 (in L3), n=%-3d %11.1f ms  %6.1f GFLOP/s  %4.1fx\n", n, t * 1e3,
                2.0 * mx.rows * mx.cols * n / t / 1e9, mv * n / t);
  }

  // ---- pool overhead: a job of `threads` chunks of ~20 us of arithmetic each,
  // against the same work on one thread.
  {
    auto work = [](int64_t b, int64_t e) {
      float v = 1.0f;
      for (int64_t i = b; i < e; i++) v = v * 0.999999f + 1e-7f;
      __atomic_fetch_add(&g_sink, uint64_t(v), __ATOMIC_RELAXED);
    };
    const int64_t per_chunk = 20000;  // ~20 us at 1 iteration/ns (dependent chain)
    Timing serial = time_it(200, [&] { work(0, per_chunk); });
    Timing par = time_it(2000, [&] { kernels::parallel_for(per_chunk * threads, work); });
    std::printf("\nparallel_for, %d chunks of %.1f us: %.1f us wall, overhead %.1f us\n", threads,
                serial.best_wall * 1e6, par.best_wall * 1e6, (par.best_wall - serial.best_wall) * 1e6);
  }

  std::free(big.w);
  std::free(big8.w);
  for (auto* v : {&w1, &w2, &w3})
    for (auto& m : *v) {
      std::free(m.packed);
      std::free(m.scale);
    }
  return g_sink == 42 ? 3 : 0;  // keep the reads alive
}
