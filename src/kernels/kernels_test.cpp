// Every fast kernel against the scalar reference, and the reference against
// plain double-precision formulas. Random shapes, values and scales; fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/numeric.h"
#include "kernels/backend.h"
#include "kernels/fast.h"
#include "kernels/fast_avx2.h"
#include "kernels/kernel_test_util.h"
#include "kernels/ref.h"
#include "kernels/threads.h"

namespace sluice {
namespace {

using namespace kernel_test;

// Restores the default thread count when a test ends.
struct KernelSettingsGuard {
  ~KernelSettingsGuard() { kernels::set_num_threads(0); }
};

// The SIMD entries of the op table this CPU runs (avx2, avx512): each one's
// products are checked against ref:: below. None on a CPU without AVX2.
std::vector<const Backend*> simd_entries() {
  std::vector<const Backend*> all = backends();
  all.erase(all.begin());  // scalar: ref:: itself
  return all;
}

float bf16_weight(const std::vector<uint16_t>& W, int cols, int r, int c) {
  return bf16_to_f32(W[size_t(r) * cols + c]);
}

// Σ|w·x| per row, the scale the tolerance is relative to.
std::vector<double> abs_dot(int rows, int cols, const float* x, auto weight) {
  std::vector<double> s(rows);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) s[r] += std::fabs(double(weight(r, c)) * x[c]);
  return s;
}


// ------------------------------------------------------------ thread pool

TEST(Threads, CoversRangeOnceInContiguousChunks) {
  KernelSettingsGuard guard;
  for (int threads : {1, 2, 3, 5}) {
    kernels::set_num_threads(threads);
    EXPECT_EQ(kernels::num_threads(), threads);
    for (int64_t n : {1, 2, 3, 4, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> calls{0};
      kernels::parallel_for(n, [&](int64_t b, int64_t e) {
        ASSERT_LT(b, e);
        calls++;
        for (int64_t i = b; i < e; i++) hits[i]++;
      });
      for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      EXPECT_EQ(calls.load(), std::min<int64_t>(n, threads)) << "n=" << n;
    }
  }
}

TEST(Threads, DefaultIsAllCpus) {
  KernelSettingsGuard guard;
  kernels::set_num_threads(0);
  EXPECT_GE(kernels::num_threads(), 1);
}

TEST(Threads, ManyQuickCallsAndNestedCalls) {
  KernelSettingsGuard guard;
  kernels::set_num_threads(3);
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 300; i++)
    kernels::parallel_for(4, [&](int64_t b, int64_t e) {
      // A nested call runs inline on this thread.
      kernels::parallel_for(e - b, [&](int64_t nb, int64_t ne) { sum += ne - nb; });
    });
  EXPECT_EQ(sum.load(), 300 * 4);
}

TEST(Threads, ConcurrentCallersBothComplete) {
  KernelSettingsGuard guard;
  kernels::set_num_threads(2);
  std::atomic<int64_t> a{0}, b{0};
  auto caller = [](std::atomic<int64_t>* total) {
    for (int i = 0; i < 500; i++)
      kernels::parallel_for(10, [&](int64_t lo, int64_t hi) { *total += hi - lo; });
  };
  std::thread other(caller, &a);
  caller(&b);
  other.join();
  EXPECT_EQ(a.load(), 5000);
  EXPECT_EQ(b.load(), 5000);
}

TEST(Threads, ExceptionFromAChunkReachesTheCaller) {
  KernelSettingsGuard guard;
  kernels::set_num_threads(2);
  EXPECT_THROW(kernels::parallel_for(2,
                                     [](int64_t b, int64_t) {
                                       if (b == 1) throw std::runtime_error("chunk");
                                     }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int> n{0};
  kernels::parallel_for(2, [&](int64_t b, int64_t e) { n += int(e - b); });
  EXPECT_EQ(n.load(), 2);
}

// ------------------------------------------------------------ fast vs ref

TEST(FastKernels, IsaIsAvailable) {
  // The best the CPU has, unless SLUICE_KERNELS picked another it has.
  if (!std::getenv("SLUICE_KERNELS")) {
    EXPECT_EQ(fast::isa(), fast::best_isa());
  }
  EXPECT_LE(int(fast::isa()), int(fast::best_isa()));
  // The CPU entry is the choice's, and every entry up to the best is there.
  EXPECT_STREQ(cpu_backend().name, fast::isa_name(fast::isa()));
  EXPECT_EQ(backends().size(), size_t(fast::best_isa()) + 1);
  EXPECT_EQ(avx512_backend() != nullptr, fast::best_isa() == fast::Isa::avx512);
  std::printf("fast kernels: %s\n", fast::isa_name(fast::isa()));
}

// Runs every SIMD entry's matvec and matmul of one weight format on one shape
// and checks: matmul row t bitwise equal to matvec on token t, the same bits
// for 1/2/3 threads, and close to ref (`want`, [n][rows]; weight(r, c) is W's
// element, for the tolerance). matmul(be, Y) and matvec(be, x, y) call the
// entry's products on the shape's W and X.
void check_entries(int rows, int cols, int n, const std::vector<float>& X, const std::vector<float>& want,
                   auto weight, auto matmul, auto matvec) {
  std::vector<float> mm(size_t(n) * rows), mv(size_t(n) * rows);
  for (const Backend* be : simd_entries()) {
    SCOPED_TRACE(be->name);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      kernels::set_num_threads(threads);
      std::fill(mm.begin(), mm.end(), NAN);
      matmul(*be, mm.data());
      for (int t = 0; t < n; t++) matvec(*be, X.data() + size_t(t) * cols, mv.data() + size_t(t) * rows);
      ASSERT_TRUE(bitwise_equal(mm, mv)) << "matmul != matvec, threads=" << threads;
      if (first.empty())
        first = mm;
      else
        ASSERT_TRUE(bitwise_equal(mm, first)) << "result depends on thread count: " << threads;
    }
    for (int t = 0; t < n; t++) {
      auto s = abs_dot(rows, cols, X.data() + size_t(t) * cols, weight);
      for (int r = 0; r < rows; r++)
        ASSERT_NEAR(mm[size_t(t) * rows + r], want[size_t(t) * rows + r], tolerance(s[r], cols))
            << "t=" << t << " r=" << r;
    }
  }
}

void check_bf16(Rng& rng, int rows, int cols, int n) {
  SCOPED_TRACE("bf16 rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               " n=" + std::to_string(n));
  auto W = random_bf16(rng, size_t(rows) * cols);
  auto X = random_activations(rng, size_t(n) * cols);
  std::vector<float> want(size_t(n) * rows);
  ref::matmul_bf16(W.data(), rows, cols, X.data(), n, want.data());
  const Bf16Ref w{W.data(), rows, cols};
  check_entries(
      rows, cols, n, X, want, [&](int r, int c) { return bf16_weight(W, cols, r, c); },
      [&](const Backend& be, float* Y) { be.matmul_bf16(w, X.data(), n, Y); },
      [&](const Backend& be, const float* x, float* y) { be.matvec_bf16(w, x, y); });
}

void check_mxfp4(Rng& rng, int rows, int cols, int n, int scale_lo, int scale_hi, float x_scale) {
  SCOPED_TRACE("mxfp4 rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               " n=" + std::to_string(n) + " scales=[" + std::to_string(scale_lo) + "," +
               std::to_string(scale_hi) + "]");
  Mxfp4 m = random_mxfp4(rng, rows, cols, scale_lo, scale_hi);
  auto X = random_activations(rng, size_t(n) * cols, x_scale);
  std::vector<float> want(size_t(n) * rows);
  ref::matmul_mxfp4(m.packed.data(), m.scale.data(), rows, cols, X.data(), n, want.data());
  std::vector<std::vector<float>> Wd(rows, std::vector<float>(size_t(cols)));
  for (int r = 0; r < rows; r++) ref::dequant_mxfp4_row(m.packed.data(), m.scale.data(), cols, r, Wd[r].data());
  const Mxfp4Ref w{m.packed.data(), m.scale.data(), rows, cols};
  check_entries(
      rows, cols, n, X, want, [&](int r, int c) { return Wd[r][c]; },
      [&](const Backend& be, float* Y) { be.matmul_mxfp4(w, X.data(), n, Y); },
      [&](const Backend& be, const float* x, float* y) { be.matvec_mxfp4(w, x, y); });
}

void check_int8(Rng& rng, int rows, int cols, int n) {
  SCOPED_TRACE("int8 rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + " n=" + std::to_string(n));
  auto W = random_int8(rng, rows, cols);
  auto X = random_activations(rng, size_t(n) * cols);
  std::vector<float> want(size_t(n) * rows);
  ref::matmul_int8(W.data(), rows, cols, X.data(), n, want.data());
  std::vector<std::vector<float>> Wd(size_t(rows), std::vector<float>(static_cast<size_t>(cols)));
  for (int r = 0; r < rows; r++) ref::dequant_int8_row(W.data(), cols, r, Wd[size_t(r)].data());
  const Int8Ref w{W.data(), rows, cols};
  check_entries(
      rows, cols, n, X, want, [&](int r, int c) { return Wd[size_t(r)][size_t(c)]; },
      [&](const Backend& be, float* Y) { be.matmul_int8(w, X.data(), n, Y); },
      [&](const Backend& be, const float* x, float* y) { be.matvec_int8(w, x, y); });
}

TEST(FastKernels, Int8OddShapes) {
  KernelSettingsGuard guard;
  Rng rng(11);
  // Columns around the 16-wide block and the 128-wide group, rows around the tile.
  for (int cols : {1, 7, 15, 16, 17, 100, 127, 128, 129, 255, 256, 300})
    for (int rows : {1, 2, 3, 5}) check_int8(rng, rows, cols, 1 + (rows + cols) % 5);
}

TEST(FastKernels, Int8RandomShapesAndThreads) {
  KernelSettingsGuard guard;
  Rng rng(12);
  std::uniform_int_distribution<int> rows(1, 70), cols(1, 900), n(1, 11);
  for (int i = 0; i < 20; i++) check_int8(rng, rows(rng), cols(rng), n(rng));
  check_int8(rng, 1000, 1024, 1);  // parallel, several L2 row blocks
  check_int8(rng, 100, 2047, 34);
}

// The product is Σ w·x up to the weights' codes (exact here) and x's int16
// rounding: at most half a step, xscale/2, per column.
TEST(RefKernels, Int8MatvecIsGroupSumsTimesScales) {
  Rng rng(13);
  const int rows = 5, cols = 300;
  auto W = random_int8(rng, rows, cols);
  auto x = random_activations(rng, cols);
  std::vector<float> y(rows), w(cols), xs(size_t(ref::int8_groups(cols)));
  std::vector<int16_t> xq(static_cast<size_t>(cols));
  ref::quantize_int16_groups(x.data(), cols, xq.data(), xs.data());
  ref::matvec_int8(W.data(), rows, cols, x.data(), y.data());
  for (int r = 0; r < rows; r++) {
    ref::dequant_int8_row(W.data(), cols, r, w.data());
    double want = 0, abs = 0, rounding = 0;
    for (int c = 0; c < cols; c++) {
      want += double(w[size_t(c)]) * x[size_t(c)];
      abs += std::fabs(double(w[size_t(c)]) * x[size_t(c)]);
      rounding += std::fabs(double(w[size_t(c)])) * 0.5 * xs[size_t(c / ref::kInt8Group)];
    }
    EXPECT_NEAR(y[size_t(r)], want, rounding + 1e-5 * abs + 1e-30) << r;
  }
}

// int16 activations: within half a step of x, the largest |x| of a group at
// ±32767, all-zero / tiny / non-finite groups as documented; and the AVX2
// quantizer gives the same bits.
TEST(RefKernels, Int16ActivationGroups) {
  Rng rng(14);
  for (int cols : {1, 17, 127, 128, 129, 300, 1000}) {
    auto x = random_activations(rng, size_t(cols));
    if (cols >= 300) {
      std::fill(x.begin() + 128, x.begin() + 256, 0.0f);   // group 1: zeros
      x[200] = 1e-30f;                                     // ... below 2^-96
      x[260] = std::numeric_limits<float>::infinity();     // group 2: not finite
    }
    const int groups = ref::int8_groups(cols);
    std::vector<int16_t> q(size_t(ref::int8_groups(cols) * ref::kInt8Group), 7), fq(q.size(), 9);
    std::vector<float> s(static_cast<size_t>(groups)), fs(static_cast<size_t>(groups));
    ref::quantize_int16_groups(x.data(), cols, q.data(), s.data());
    for (int g = 0; g < groups; g++) {
      const int c0 = g * ref::kInt8Group, c1 = std::min(cols, c0 + ref::kInt8Group);
      float m = 0;
      for (int c = c0; c < c1; c++) m = std::max(m, std::fabs(x[size_t(c)]));
      if (cols >= 300 && g == 1) {
        EXPECT_EQ(s[1], 0.0f);
      }
      if (cols >= 300 && g == 2) {
        EXPECT_TRUE(std::isnan(s[2]));
      }
      int peak = 0;
      for (int c = c0; c < c1; c++) {
        peak = std::max(peak, std::abs(int(q[size_t(c)])));
        if (std::isfinite(s[size_t(g)])) {
          EXPECT_LE(std::fabs(double(q[size_t(c)]) * s[size_t(g)] - x[size_t(c)]), 0.5001 * s[size_t(g)] + double(ref::kInt16Tiny))
              << cols << " " << c;
        } else {
          EXPECT_EQ(q[size_t(c)], 0);
        }
      }
      if (std::isfinite(s[size_t(g)]) && s[size_t(g)] > 0) {
        EXPECT_EQ(peak, 32767) << cols << " " << g;
      }
      if (m == 0) {
        EXPECT_EQ(s[size_t(g)], 0.0f);
      }
    }
#if defined(__x86_64__)
    if (fast::best_isa() >= fast::Isa::avx2) {
      fast::avx2::quantize_int16_groups(x.data(), cols, fq.data(), fs.data());
      EXPECT_EQ(std::memcmp(fs.data(), s.data(), fs.size() * 4), 0) << cols;
      EXPECT_TRUE(std::equal(q.begin(), q.begin() + cols, fq.begin())) << cols;
      for (size_t c = size_t(cols); c < fq.size(); c++) EXPECT_EQ(fq[c], 0) << c;  // padding: zeros
    }
#endif
  }
}

TEST(FastKernels, Bf16OddShapes) {
  KernelSettingsGuard guard;
  Rng rng(1);
  // Columns around the 16-wide block and rows around the 4-row tile.
  for (int cols : {1, 2, 7, 8, 15, 16, 17, 31, 33, 48, 100, 257})
    for (int rows : {1, 2, 3, 4, 5, 9}) check_bf16(rng, rows, cols, 1 + (rows + cols) % 5);
}

TEST(FastKernels, Bf16RandomShapes) {
  KernelSettingsGuard guard;
  Rng rng(2);
  std::uniform_int_distribution<int> rows(1, 70), cols(1, 600), n(1, 11);
  for (int i = 0; i < 25; i++) check_bf16(rng, rows(rng), cols(rng), n(rng));
}

TEST(FastKernels, Bf16LargeEnoughForThreadsAndBlocking) {
  KernelSettingsGuard guard;
  Rng rng(3);
  // Parallel, two L2 row blocks (64 rows of 4 KB) and two token blocks (32
  // tokens of 8 KB) per thread.
  check_bf16(rng, 100, 2047, 34);
  check_bf16(rng, 1031, 300, 1);
}

TEST(FastKernels, Mxfp4RandomShapes) {
  KernelSettingsGuard guard;
  Rng rng(4);
  for (int cols : {32, 64, 96, 288})
    for (int rows : {1, 2, 3, 5}) check_mxfp4(rng, rows, cols, 1 + (rows + cols) % 6, 117, 137, 1.0f);
  std::uniform_int_distribution<int> rows(1, 70), groups(1, 20), n(1, 11);
  for (int i = 0; i < 20; i++) check_mxfp4(rng, rows(rng), 32 * groups(rng), n(rng), 110, 140, 1.0f);
}

TEST(FastKernels, Mxfp4ExtremeScales) {
  KernelSettingsGuard guard;
  Rng rng(5);
  // Nearly the whole E8M0 range, from s = 0 (the subnormal 2^-127) to 252
  // (above it 6·2^(s-127) overflows; Mxfp4DecodesEveryCodeAndScaleExactly
  // covers that), with x small enough that no sum overflows.
  check_mxfp4(rng, 37, 320, 5, 0, 252, std::ldexp(1.0f, -24));
  // Only tiny scales: weights and products are subnormal.
  check_mxfp4(rng, 19, 256, 3, 0, 4, 1.0f);
  check_mxfp4(rng, 9, 96, 2, 0, 0, 1.0f);
}

TEST(FastKernels, Mxfp4LargeEnoughForThreadsAndBlocking) {
  KernelSettingsGuard guard;
  Rng rng(6);
  // Parallel with several L2 row blocks (480 rows of 544 B), then two token
  // blocks (16 tokens of 16 KB).
  check_mxfp4(rng, 1000, 1024, 2, 120, 134, 1.0f);
  check_mxfp4(rng, 40, 4096, 20, 120, 134, 1.0f);
}

TEST(FastKernels, Mxfp4DecodesEveryCodeAndScaleExactly) {
  KernelSettingsGuard guard;
  // One row per (code, scale): every element of the row has that code, and x
  // is one-hot, so y is exactly the dequantized weight.
  const int cols = 64;
  for (int s = 0; s < 255; s += 1) {
    for (int code = 0; code < 16; code++) {
      std::vector<uint8_t> packed(cols / 2, uint8_t(code | code << 4)), scale(cols / 32, uint8_t(s));
      for (int hot = 0; hot < cols; hot += 13) {
        std::vector<float> x(cols, 0.0f);
        x[hot] = 1.0f;
        float y = NAN;
        cpu_backend().matvec_mxfp4(Mxfp4Ref{packed.data(), scale.data(), 1, cols}, x.data(), &y);
        float want = std::ldexp(kE2M1[code], s - 127);
        // ±0 weights give +0: sums start at +0 and +0 + -0 = +0 (same in ref).
        if (want == 0.0f) want = 0.0f;
        // 2·2^127 and the like overflow FP32: outside the contract (no real
        // checkpoint has them); the result must still not look finite.
        if (std::isinf(want)) {
          ASSERT_FALSE(std::isfinite(y)) << "code=" << code << " s=" << s;
          continue;
        }
        ASSERT_EQ(std::bit_cast<uint32_t>(y), std::bit_cast<uint32_t>(want))
            << "code=" << code << " s=" << s << " col=" << hot;
      }
    }
  }
}

TEST(FastKernels, NonFiniteInputsPropagate) {
  KernelSettingsGuard guard;
  Rng rng(7);
  const int rows = 6, cols = 40;
  auto W = random_bf16(rng, rows * cols);
  auto x = random_activations(rng, cols);
  x[17] = NAN;
  std::vector<float> y(rows);
  for (const Backend* be : backends()) {
    be->matvec_bf16(Bf16Ref{W.data(), rows, cols}, x.data(), y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << be->name;
  }
}

TEST(FastKernels, ScalarEntryIsTheReference) {
  Rng rng(8);
  const int rows = 13, cols = 70, n = 3;
  auto W = random_bf16(rng, rows * cols);
  auto X = random_activations(rng, n * cols);
  std::vector<float> a(n * rows), b(n * rows);
  scalar_backend().matmul_bf16(Bf16Ref{W.data(), rows, cols}, X.data(), n, a.data());
  ref::matmul_bf16(W.data(), rows, cols, X.data(), n, b.data());
  EXPECT_TRUE(bitwise_equal(a, b));
}

// The AVX-512 bodies do the AVX2 ones' operations two rows per register: every
// product of the avx512 entry has the avx2 entry's bits (so the x86 SIMD
// entries are one family of bits). The checks above run each entry against
// ref; this one pins the two SIMD entries to each other.
TEST(FastKernels, Avx512GivesTheAvx2Bits) {
  if (!avx512_backend()) GTEST_SKIP() << "this CPU has no AVX-512";
  KernelSettingsGuard guard;
  Rng rng(9);
  auto both = [](auto product, size_t outputs) {
    std::vector<float> a(outputs, NAN), b(outputs, NAN);
    product(*avx2_backend(), a.data());
    product(*avx512_backend(), b.data());
    return bitwise_equal(a, b);
  };
  struct Shape {
    int rows, cols, n;
  };
  // Odd rows (a pair's second row is its first), partial 16-column blocks, an
  // odd last MXFP4 group, token counts around the 4-, 6- and 8-token tiles, and
  // shapes large enough for threads, L2 row blocks, column chunks and token blocks.
  std::vector<Shape> shapes = {{1, 32, 1}, {3, 96, 9}, {5, 288, 17}, {8, 64, 8}, {7, 160, 4},
                               {100, 2048, 34}, {1000, 1024, 3}, {40, 4096, 20}, {33, 7168, 1}};
  std::uniform_int_distribution<int> rows(1, 70), groups(1, 20), n(1, 19);
  for (int i = 0; i < 20; i++) shapes.push_back({rows(rng), 32 * groups(rng), n(rng)});
  for (int threads : {1, 2, 3}) {
    kernels::set_num_threads(threads);
    for (const Shape& s : shapes) {
      SCOPED_TRACE("rows=" + std::to_string(s.rows) + " cols=" + std::to_string(s.cols) + " n=" +
                   std::to_string(s.n) + " threads=" + std::to_string(threads));
      const size_t outputs = size_t(s.n) * s.rows;
      for (int bf16_cols : {s.cols, s.cols + 1 + s.rows % 15}) {  // bf16 also off the 16-column block
        auto W = random_bf16(rng, size_t(s.rows) * bf16_cols);
        auto Xb = random_activations(rng, size_t(s.n) * bf16_cols);
        const Bf16Ref w{W.data(), s.rows, bf16_cols};
        ASSERT_TRUE(both([&](const Backend& be, float* y) { be.matmul_bf16(w, Xb.data(), s.n, y); }, outputs));
        ASSERT_TRUE(both([&](const Backend& be, float* y) { be.matvec_bf16(w, Xb.data(), y); }, size_t(s.rows)));
      }
      for (auto [lo, hi] : {std::pair{110, 140}, std::pair{0, 8}, std::pair{240, 250}}) {
        Mxfp4 m = random_mxfp4(rng, s.rows, s.cols, lo, hi);
        auto Xm = random_activations(rng, size_t(s.n) * s.cols, hi > 200 ? std::ldexp(1.0f, -120) : 1.0f);
        const Mxfp4Ref w{m.packed.data(), m.scale.data(), s.rows, s.cols};
        ASSERT_TRUE(both([&](const Backend& be, float* y) { be.matmul_mxfp4(w, Xm.data(), s.n, y); }, outputs))
            << "scales " << lo << ".." << hi;
        ASSERT_TRUE(both([&](const Backend& be, float* y) { be.matvec_mxfp4(w, Xm.data(), y); }, size_t(s.rows)))
            << "scales " << lo << ".." << hi;
      }
    }
  }
}

// ------------------------------------------------------------ ref vs double

TEST(RefKernels, MatvecAgreesWithDouble) {
  Rng rng(10);
  const int rows = 17, cols = 333;
  auto W = random_bf16(rng, rows * cols);
  auto x = random_activations(rng, cols);
  std::vector<float> y(rows);
  ref::matvec_bf16(W.data(), rows, cols, x.data(), y.data());
  for (int r = 0; r < rows; r++) {
    double want = 0, abs = 0;
    for (int c = 0; c < cols; c++) {
      want += double(bf16_weight(W, cols, r, c)) * x[c];
      abs += std::fabs(double(bf16_weight(W, cols, r, c)) * x[c]);
    }
    EXPECT_NEAR(y[r], want, 1e-5 * abs) << r;
  }
}

TEST(RefKernels, DequantMxfp4MatchesTheSpecFormula) {
  Rng rng(11);
  const int rows = 3, cols = 96;
  Mxfp4 m = random_mxfp4(rng, rows, cols, 0, 254);
  std::vector<float> row(cols);
  for (int r = 0; r < rows; r++) {
    ref::dequant_mxfp4_row(m.packed.data(), m.scale.data(), cols, r, row.data());
    for (int c = 0; c < cols; c++) {
      uint8_t byte = m.packed[size_t(r) * cols / 2 + c / 2];
      int code = c % 2 == 0 ? byte & 15 : byte >> 4;
      const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
      float v = std::ldexp((code & 8 ? -1 : 1) * mag[code & 7],
                           int(m.scale[size_t(r) * cols / 32 + c / 32]) - 127);
      EXPECT_EQ(std::bit_cast<uint32_t>(row[c]), std::bit_cast<uint32_t>(v)) << r << "," << c;
    }
  }
}

TEST(RefKernels, RmsnormAgreesWithDouble) {
  Rng rng(12);
  for (int n : {1, 7, 64, 7168}) {
    auto x = random_activations(rng, n);
    auto w = random_activations(rng, n);
    const float eps = 1e-5f;
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    double inv = 1.0 / std::sqrt(ss / n + eps);
    EXPECT_NEAR(ref::rms_inv(x.data(), n, eps), inv, 1e-5 * inv);
    std::vector<float> y(n);
    ref::rmsnorm(x.data(), w.data(), n, eps, y.data());
    for (int i = 0; i < n; i++) {
      double want = double(w[i]) * x[i] * inv;
      ASSERT_NEAR(y[i], want, 1e-5 * std::fabs(want) + 1e-30) << n << " " << i;
    }
    ref::rmsnorm(x.data(), w.data(), n, eps, x.data());  // in place
    for (int i = 0; i < n; i++) ASSERT_EQ(x[i], y[i]);
  }
  // All zeros: eps keeps it finite and the result is zero.
  std::vector<float> z(8, 0.0f), w(8, 1.0f), y(8);
  ref::rmsnorm(z.data(), w.data(), 8, 1e-6f, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(RefKernels, L2normAgreesWithDouble) {
  Rng rng(13);
  for (int n : {1, 5, 128}) {
    auto x = random_activations(rng, n);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    double scale = 1.0 / std::max(std::sqrt(ss), 1e-6);
    auto y = x;
    ref::l2norm(y.data(), n, 1e-6f);
    for (int i = 0; i < n; i++) ASSERT_NEAR(y[i], x[i] * scale, 1e-6 * std::fabs(x[i] * scale) + 1e-30);
  }
  // Below eps the norm is clamped: x / eps.
  std::vector<float> tiny = {1e-8f, -2e-8f};
  ref::l2norm(tiny.data(), 2, 1e-6f);
  EXPECT_NEAR(tiny[0], 1e-2, 1e-8);
  EXPECT_NEAR(tiny[1], -2e-2, 1e-8);
}

TEST(RefKernels, SoftmaxAgreesWithDouble) {
  Rng rng(14);
  for (int n : {1, 2, 10, 896}) {
    auto x = random_activations(rng, n, 5.0f);
    x[0] = 1000.0f;  // would overflow exp without the max subtraction
    double m = *std::max_element(x.begin(), x.end()), sum = 0;
    for (float v : x) sum += std::exp(double(v) - m);
    auto y = x;
    ref::softmax(y.data(), n);
    double total = 0;
    for (int i = 0; i < n; i++) {
      double want = std::exp(double(x[i]) - m) / sum;
      ASSERT_NEAR(y[i], want, 1e-6 * want + 1e-38) << n << " " << i;
      total += y[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(RefKernels, SituAgreesWithDouble) {
  const double beta = 4.0, beta_lin = 25.0;
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  Rng rng(15);
  std::vector<float> g = random_activations(rng, 200, 10.0f), u = random_activations(rng, 200, 10.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, 80.0f, -80.0f, 200.0f, -200.0f, 1e4f}) {
    g.push_back(v);
    u.push_back(-v);
  }
  for (size_t i = 0; i < g.size(); i++) {
    double a = beta * std::tanh(g[i] / beta) * sig(g[i]);
    double b = beta_lin * std::tanh(u[i] / beta_lin);
    double want = a * b;
    float got = ref::situ(g[i], u[i], float(beta), float(beta_lin));
    ASSERT_NEAR(got, want, 1e-5 * std::fabs(want) + 1e-30) << g[i] << " " << u[i];
    ASSERT_LE(std::fabs(got), 100.0f);  // < 100 in exact arithmetic; tanh rounds to 1 in FP32
    ASSERT_NEAR(ref::silu(g[i]), g[i] * sig(g[i]), 1e-5 * std::fabs(g[i] * sig(g[i])) + 1e-30);
  }
  // situ_glu writes the elementwise result, also in place.
  std::vector<float> out(g.size());
  ref::situ_glu(g.data(), u.data(), int(g.size()), 4.0f, 25.0f, out.data());
  for (size_t i = 0; i < g.size(); i++) ASSERT_EQ(out[i], ref::situ(g[i], u[i], 4.0f, 25.0f));
  ref::situ_glu(g.data(), u.data(), int(g.size()), 4.0f, 25.0f, g.data());
  EXPECT_TRUE(bitwise_equal(g, out));
}

TEST(RefKernels, CausalConvStepMatchesFullConvolution) {
  Rng rng(16);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int K : {1, 2, 4}) {
    const int C = 5, steps = 7;
    auto w = random_activations(rng, size_t(C) * K);
    auto inputs = random_activations(rng, size_t(steps) * C);
    std::vector<float> hist(size_t(std::max(K - 1, 0)) * C, 0.0f), y(C);
    for (int s = 0; s < steps; s++) {
      ref::causal_conv_silu_step(w.data(), C, K, hist.data(), inputs.data() + size_t(s) * C, y.data());
      for (int c = 0; c < C; c++) {
        // Tap j applies to the input K-1-j steps back (zeros before the start).
        double acc = 0;
        for (int j = 0; j < K; j++) {
          int src = s - (K - 1 - j);
          if (src >= 0) acc += double(w[size_t(c) * K + j]) * inputs[size_t(src) * C + c];
        }
        double want = acc * sig(acc);
        ASSERT_NEAR(y[c], want, 1e-5 * std::fabs(want) + 1e-5 * std::fabs(acc) + 1e-30)
            << "K=" << K << " step=" << s << " c=" << c;
      }
    }
  }
}

TEST(RefKernels, CausalConvStepByChannelRangesIsTheWholeStep) {
  Rng rng(17);
  for (int K : {1, 2, 4}) {
    const int C = 11, steps = 6;
    auto w = random_activations(rng, size_t(C) * K);
    auto inputs = random_activations(rng, size_t(steps) * C);
    std::vector<float> ha(size_t(std::max(K - 1, 0)) * C, 0.0f), hb = ha, ya(C), yb(C);
    for (int s = 0; s < steps; s++) {
      const float* x = inputs.data() + size_t(s) * C;
      ref::causal_conv_silu_step(w.data(), C, K, ha.data(), x, ya.data());
      const int cuts[][2] = {{4, 9}, {0, 3}, {9, 11}, {3, 4}};  // [0, C) in pieces, out of order
      for (const auto& r : cuts) ref::causal_conv_silu_step(w.data(), C, K, hb.data(), x, yb.data(), r[0], r[1]);
      ASSERT_EQ(std::memcmp(ya.data(), yb.data(), sizeof(float) * C), 0) << "K=" << K << " step=" << s;
      ASSERT_EQ(ha, hb) << "K=" << K << " step=" << s;  // history: the same values (no NaN here)
    }
  }
}

}  // namespace
}  // namespace sluice
