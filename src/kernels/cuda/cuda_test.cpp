// The CUDA kernels against the scalar reference (kernels/ref.h) on random
// shapes and values, plus their bitwise contracts: matmul == matvec per
// token, grouped == one by one, every decode setting the same bits.
// Built only with SLUICE_CUDA; ctest label "gpu"; every test skips (not
// passes) on a machine without a usable GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/numeric.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/upload.h"
#include "kernels/dsa.h"
#include "kernels/kernel_test_util.h"
#include "kernels/ref.h"

namespace sluice {
namespace {

using namespace kernel_test;

#define SKIP_WITHOUT_GPU() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"

void ok(cudaError_t e) {
  if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
}

// A device copy of a host vector; poisoned (0xff bytes = NaN floats) when
// made from a size, so an output element the kernel never writes fails.
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    ok(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)));
    ok(cudaMemset(p, 0xff, std::max<size_t>(1, n) * sizeof(T)));
  }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
    ok(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
  void poison() { ok(cudaMemset(p, 0xff, std::max<size_t>(1, n) * sizeof(T))); }
  std::vector<T> get() const {
    ok(cudaDeviceSynchronize());
    std::vector<T> v(n);
    ok(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// Restores the default MXFP4 tuning when a test ends.
struct TuningGuard {
  cuda::Mxfp4Tuning t = cuda::mxfp4_tuning();
  ~TuningGuard() { cuda::set_mxfp4_tuning(t); }
};

// |got - ref| <= 1e-5·Σ|w·x| (+ subnormal steps), per output; NaN fails.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& abs_sum,
                  int cols, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) {
    const double tol = tolerance(abs_sum[i], cols);
    ASSERT_LE(std::fabs(double(got[i]) - double(want[i])), tol) << what << " at " << i << ": " << got[i] << " vs " << want[i];
  }
}

std::vector<double> abs_dot_mxfp4(const Mxfp4& m, int rows, int cols, const float* X, int n) {
  std::vector<double> s(size_t(n) * rows);
  std::vector<float> w(cols);
  for (int r = 0; r < rows; r++) {
    ref::dequant_mxfp4_row(m.packed.data(), m.scale.data(), cols, r, w.data());
    for (int t = 0; t < n; t++)
      for (int c = 0; c < cols; c++) s[size_t(t) * rows + r] += std::fabs(double(w[c]) * X[size_t(t) * cols + c]);
  }
  return s;
}

// One MXFP4 case: cuda matmul vs ref, and bitwise vs cuda matvec per token.
void check_mxfp4(Rng& rng, int rows, int cols, int n, int lo = 110, int hi = 135) {
  SCOPED_TRACE(testing::Message() << rows << "x" << cols << " n=" << n);
  const Mxfp4 m = random_mxfp4(rng, rows, cols, lo, hi);
  const std::vector<float> X = random_activations(rng, size_t(n) * cols);
  std::vector<float> want(size_t(n) * rows);
  ref::matmul_mxfp4(m.packed.data(), m.scale.data(), rows, cols, X.data(), n, want.data());
  const std::vector<double> abs_sum = abs_dot_mxfp4(m, rows, cols, X.data(), n);
  Dev<uint8_t> dp(m.packed), ds(m.scale);
  TuningGuard guard;
  // Every tuning against ref, and bitwise against the first of its family.
  std::vector<float> first[2];
  for (const cuda::Mxfp4Tuning tuning : cuda::mxfp4_tunings()) {
    SCOPED_TRACE(testing::Message() << cuda::mxfp4_decode_name(tuning.decode) << " " << tuning.rows_per_thread);
    cuda::set_mxfp4_tuning(tuning);
    Dev<float> dx(X), dy(size_t(n) * rows);
    cuda::matmul_mxfp4(dp.p, ds.p, rows, cols, dx.p, n, dy.p);
    const std::vector<float> got = dy.get();
    expect_close(got, want, abs_sum, cols, "mxfp4");
    std::vector<float>& f = first[cuda::mxfp4_family(tuning, cols)];
    if (f.empty()) f = got;
    ASSERT_TRUE(bitwise_equal(f, got));
    for (int t = 0; t < n; t++) {
      Dev<float> y1(rows);
      cuda::matvec_mxfp4(dp.p, ds.p, rows, cols, dx.p + size_t(t) * cols, y1.p);
      const std::vector<float> one = y1.get();
      ASSERT_EQ(0, std::memcmp(one.data(), got.data() + size_t(t) * rows, rows * sizeof(float))) << "token " << t;
    }
  }
}

TEST(CudaKernels, Mxfp4RandomShapesMatchRef) {
  SKIP_WITHOUT_GPU();
  Rng rng(16);
  std::uniform_int_distribution<int> rows(1, 150), groups(1, 40), tokens(1, 5);
  for (int i = 0; i < 12; i++) check_mxfp4(rng, rows(rng), 32 * groups(rng), tokens(rng));
  check_mxfp4(rng, 3, 7168, 2);  // the widest row a team takes
  // The warp kernel's lanes walk ceil(G/32) groups each: every count, full and partial.
  for (int groups : {64, 100, 150, 190, 224}) check_mxfp4(rng, 45, 32 * groups, 1);
  // Widths the tensor-core kernel takes (cols % 512 == 0, <= 5120): partial
  // 16-row blocks, 1-5 tokens (passes of two), the widest.
  check_mxfp4(rng, 77, 512, 3);
  check_mxfp4(rng, 16, 1024, 5);
  check_mxfp4(rng, 131, 1536, 2);
  check_mxfp4(rng, 9, 5120, 1);
}

TEST(CudaKernels, Mxfp4AtK3ExpertShapes) {
  SKIP_WITHOUT_GPU();
  Rng rng(3584);
  check_mxfp4(rng, 3072, 3584, 1);  // w1, w3: latent 3584 -> 3072
  check_mxfp4(rng, 3584, 3072, 3);  // w2: 3072 -> latent 3584, a few prefill tokens
}

TEST(CudaKernels, Mxfp4ExtremeScales) {
  SKIP_WITHOUT_GPU();
  Rng rng(7);
  check_mxfp4(rng, 37, 256, 2, 0, 40);     // down to the subnormal 2^-127
  check_mxfp4(rng, 37, 256, 2, 200, 230);  // large, finite
  check_mxfp4(rng, 37, 512, 2, 0, 40);     // the same through the tensor cores
  check_mxfp4(rng, 37, 512, 2, 200, 230);
}

// Row 16·s + code: every column that code, every group scale s (0..254).
Mxfp4 every_code_and_scale(int cols) {
  const int rows = 255 * 16, G = cols / 32;
  Mxfp4 m;
  m.packed.assign(size_t(rows) * cols / 2, 0);
  m.scale.assign(size_t(rows) * G, 0);
  for (int s = 0; s < 255; s++)
    for (int code = 0; code < 16; code++) {
      const int r = s * 16 + code;
      for (int c = 0; c < cols; c += 2) m.packed[size_t(r) * cols / 2 + c / 2] = uint8_t(code | (code << 4));
      for (int g = 0; g < G; g++) m.scale[size_t(r) * G + g] = uint8_t(s);
    }
  return m;
}
// y of that matrix times a one-hot x: exactly value(code)·2^(s-127).
void expect_every_code_exact(const std::vector<float>& y, const std::string& what) {
  for (int s = 0; s < 255; s++)
    for (int code = 0; code < 16; code++) {
      const float want = kE2M1[code] * e8m0_to_f32(uint8_t(s));
      const float got = y[size_t(s) * 16 + code];
      ASSERT_TRUE(got == want)  // ±0 alike: ref sums from +0 too
          << "code " << code << " s " << s << " " << what << ": " << got << " vs " << want;
    }
}

// One-hot x: y[r] is exactly value(code)·2^(s-127) for every code and every
// scale 0..254, including the subnormal s = 0 and overflow to inf at the top.
TEST(CudaKernels, Mxfp4DecodesEveryCodeAndScaleExactly) {
  SKIP_WITHOUT_GPU();
  TuningGuard guard;
  for (const int cols : {64, 512}) {  // 512: a width the tensor-core kernel takes
    SCOPED_TRACE(testing::Message() << "cols " << cols);
    const int rows = 255 * 16;
    const Mxfp4 m = every_code_and_scale(cols);
    Dev<uint8_t> dp(m.packed), ds(m.scale);
    for (int hot : {0, 1, 31, 32, 63, cols - 1})
      for (const cuda::Mxfp4Tuning tuning : cuda::mxfp4_tunings()) {
        const cuda::Mxfp4Decode dec = tuning.decode;
        cuda::set_mxfp4_tuning(tuning);
        std::vector<float> x(cols, 0.0f);
        x[hot] = 1.0f;
        Dev<float> dx(x), dy(rows);
        cuda::matvec_mxfp4(dp.p, ds.p, rows, cols, dx.p, dy.p);
        expect_every_code_exact(dy.get(), "hot " + std::to_string(hot) + " " + cuda::mxfp4_decode_name(dec));
      }
  }
}

TEST(CudaKernels, Mxfp4EveryTuningGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  TuningGuard guard;
  Rng rng(11);
  const int rows = 333, cols = 3584, n = 3;
  const Mxfp4 m = random_mxfp4(rng, rows, cols, 100, 140);
  const std::vector<float> X = random_activations(rng, size_t(n) * cols);
  Dev<uint8_t> dp(m.packed), ds(m.scale);
  Dev<float> dx(X);
  std::vector<float> first[2], first1[2];  // per family (cuda.h)
  for (const cuda::Mxfp4Tuning tuning : cuda::mxfp4_tunings()) {
    const cuda::Mxfp4Decode dec = tuning.decode;
    const int rpt = tuning.rows_per_thread, fam = cuda::mxfp4_family(tuning, cols);
    cuda::set_mxfp4_tuning(tuning);
    Dev<float> dy(size_t(n) * rows), dy1(rows);
    cuda::matmul_mxfp4(dp.p, ds.p, rows, cols, dx.p, n, dy.p);
    cuda::matvec_mxfp4(dp.p, ds.p, rows, cols, dx.p, dy1.p);  // decode: another kernel for lookup_async
    const std::vector<float> y = dy.get(), y1 = dy1.get();
    if (first[fam].empty())
      first[fam] = y, first1[fam] = y1;
    else
      ASSERT_TRUE(bitwise_equal(first[fam], y)) << cuda::mxfp4_decode_name(dec) << " rows/thread " << rpt;
    ASSERT_TRUE(bitwise_equal(first1[fam], y1)) << cuda::mxfp4_decode_name(dec) << " rows/thread " << rpt;
    ASSERT_EQ(0, std::memcmp(y1.data(), y.data(), rows * sizeof(float)));
  }
  EXPECT_THROW(cuda::set_mxfp4_tuning({cuda::Mxfp4Decode::bits, 5}), std::invalid_argument);
  EXPECT_THROW(cuda::set_mxfp4_tuning({cuda::Mxfp4Decode::lookup, 2}), std::invalid_argument);
  EXPECT_THROW(cuda::set_mxfp4_tuning({cuda::Mxfp4Decode::lookup_async, 16}), std::invalid_argument);
  EXPECT_THROW(cuda::set_mxfp4_tuning({cuda::Mxfp4Decode::mma, 4}), std::invalid_argument);
  // The two families differ by summation order only (both within ref's bound: check_mxfp4).
  ASSERT_FALSE(first[1].empty());
  EXPECT_FALSE(bitwise_equal(first[0], first[1]));
}

// A grouped call (different experts, different token counts, some empty) is
// bitwise the same calls made one by one: the default tuning, and the
// tensor-core kernel (1-4 tokens: passes of two) at a width it takes; frag:
// the matrices in fragment order through grouped_mxfp4_frag.
// A matrix's device copy in fragment order, made from its device copy in the
// checkpoint's layout.
struct FragCopy {
  Dev<uint8_t> packed, scale;
  FragCopy(const Dev<uint8_t>& p, const Dev<uint8_t>& s, int rows, int cols)
      : packed(cuda::mxfp4_frag_packed_bytes(rows, cols)), scale(cuda::mxfp4_frag_scale_bytes(rows, cols)) {
    cuda::mxfp4_frag_packed(p.p, rows, cols, packed.p);
    cuda::mxfp4_frag_scale(s.p, rows, cols, scale.p);
  }
};
void check_grouped_one_by_one(int rows, int cols, bool frag = false) {
  SCOPED_TRACE(testing::Message() << rows << "x" << cols << " "
                                  << (frag ? "fragment order" : cuda::mxfp4_decode_name(cuda::mxfp4_tuning().decode)));
  Rng rng(12);
  const int ntasks = 70;  // > one launch's 64 tasks
  std::vector<std::unique_ptr<Dev<uint8_t>>> P, S;
  std::vector<std::unique_ptr<FragCopy>> F;
  std::vector<std::unique_ptr<Dev<float>>> Xs, Ys;
  std::vector<cuda::MxTask> tasks;
  std::uniform_int_distribution<int> tokens(0, 4);
  for (int e = 0; e < ntasks; e++) {
    const Mxfp4 m = random_mxfp4(rng, rows, cols, 115, 130);
    const int n = tokens(rng);
    P.push_back(std::make_unique<Dev<uint8_t>>(m.packed));
    S.push_back(std::make_unique<Dev<uint8_t>>(m.scale));
    const uint8_t *wp = P.back()->p, *ws = S.back()->p;
    if (frag) {
      F.push_back(std::make_unique<FragCopy>(*P.back(), *S.back(), rows, cols));
      wp = F.back()->packed.p, ws = F.back()->scale.p;
    }
    Xs.push_back(std::make_unique<Dev<float>>(random_activations(rng, size_t(n) * cols)));
    Ys.push_back(std::make_unique<Dev<float>>(size_t(n) * rows));
    tasks.push_back({wp, ws, Xs.back()->p, Ys.back()->p, n});
  }
  const auto grouped = frag ? cuda::grouped_mxfp4_frag : cuda::grouped_mxfp4;
  grouped(tasks.data(), ntasks, rows, cols, nullptr);
  for (int e = 0; e < ntasks; e++) {
    const std::vector<float> together = Ys[e]->get();
    Dev<float> y(together.size());
    cuda::MxTask one = tasks[e];
    one.Y = y.p;
    grouped(&one, 1, rows, cols, nullptr);
    ASSERT_TRUE(bitwise_equal(together, y.get())) << "task " << e;
  }
}

TEST(CudaKernels, GroupedMxfp4IsBitwiseOneByOne) {
  SKIP_WITHOUT_GPU();
  TuningGuard guard;
  check_grouped_one_by_one(96, 224);
  cuda::set_mxfp4_tuning({cuda::Mxfp4Decode::mma, 2});
  check_grouped_one_by_one(100, 1024);
  cuda::set_mxfp4_tuning({cuda::Mxfp4Decode::mma3, 1});
  check_grouped_one_by_one(100, 1024);
}

// Decode (one token per task) under every tuning (lookup_async and the warp
// kernels have their own decode kernels): blocks cross task boundaries and
// tail tiles; the bits equal the lookup kernel's (the tensor-core family's
// cross-task bits: check_grouped_one_by_one).
TEST(CudaKernels, GroupedMxfp4DecodeIsBitwiseLookup) {
  SKIP_WITHOUT_GPU();
  TuningGuard guard;
  Rng rng(13);
  const int rows = 200, cols = 1024, ntasks = 70;
  std::vector<std::unique_ptr<Dev<uint8_t>>> P, S;
  std::vector<std::unique_ptr<Dev<float>>> Xs, Ya, Yb;
  std::vector<cuda::MxTask> ta, tb;
  std::uniform_int_distribution<int> tokens(0, 5);
  for (int e = 0; e < ntasks; e++) {
    const Mxfp4 m = random_mxfp4(rng, rows, cols, 115, 130);
    const int n = tokens(rng) == 0 ? 0 : 1;
    P.push_back(std::make_unique<Dev<uint8_t>>(m.packed));
    S.push_back(std::make_unique<Dev<uint8_t>>(m.scale));
    Xs.push_back(std::make_unique<Dev<float>>(random_activations(rng, size_t(cols))));
    Ya.push_back(std::make_unique<Dev<float>>(size_t(rows)));
    Yb.push_back(std::make_unique<Dev<float>>(size_t(rows)));
    ta.push_back({P[e]->p, S[e]->p, Xs[e]->p, Ya[e]->p, n});
    tb.push_back({P[e]->p, S[e]->p, Xs[e]->p, Yb[e]->p, n});
  }
  cuda::set_mxfp4_tuning({cuda::Mxfp4Decode::lookup, 4});
  cuda::grouped_mxfp4(ta.data(), ntasks, rows, cols);
  for (const cuda::Mxfp4Tuning tuning : cuda::mxfp4_tunings()) {
    if (cuda::mxfp4_family(tuning, cols) != 0) continue;
    cuda::set_mxfp4_tuning(tuning);
    for (int e = 0; e < ntasks; e++)
      if (tb[e].n) Yb[e]->poison();
    cuda::grouped_mxfp4(tb.data(), ntasks, rows, cols);
    for (int e = 0; e < ntasks; e++)
      if (ta[e].n) {
        ASSERT_TRUE(bitwise_equal(Ya[e]->get(), Yb[e]->get()))
            << "task " << e << " " << cuda::mxfp4_decode_name(tuning.decode) << " " << tuning.rows_per_thread;
      }
  }
}

TEST(CudaKernels, Mxfp4RejectsBadShapes) {
  SKIP_WITHOUT_GPU();
  Dev<uint8_t> p(4096), s(256);
  Dev<float> x(9000), y(16);
  EXPECT_THROW(cuda::matvec_mxfp4(p.p, s.p, 1, 48, x.p, y.p), std::invalid_argument);     // cols % 32
  EXPECT_THROW(cuda::matvec_mxfp4(p.p, s.p, 1, 7200, x.p, y.p), std::invalid_argument);  // too wide
  EXPECT_THROW(cuda::matvec_mxfp4(p.p + 1, s.p, 1, 64, x.p, y.p), std::invalid_argument);  // misaligned
}

// ---- MXFP4 in fragment order (mxfp4_frag.cu)


// One case: n tokens in one call against ref, and bitwise against each token
// alone.
void check_frag(Rng& rng, int rows, int cols, int n, int lo = 110, int hi = 135) {
  SCOPED_TRACE(testing::Message() << "frag " << rows << "x" << cols << " n=" << n);
  ASSERT_TRUE(cuda::mxfp4_frag_takes(rows, cols));
  const Mxfp4 m = random_mxfp4(rng, rows, cols, lo, hi);
  const std::vector<float> X = random_activations(rng, size_t(n) * cols);
  std::vector<float> want(size_t(n) * rows);
  ref::matmul_mxfp4(m.packed.data(), m.scale.data(), rows, cols, X.data(), n, want.data());
  Dev<uint8_t> dp(m.packed), ds(m.scale);
  const FragCopy f(dp, ds, rows, cols);
  Dev<float> dx(X), dy(size_t(n) * rows);
  const cuda::MxTask task{f.packed.p, f.scale.p, dx.p, dy.p, n};
  cuda::grouped_mxfp4_frag(&task, 1, rows, cols);
  const std::vector<float> got = dy.get();
  expect_close(got, want, abs_dot_mxfp4(m, rows, cols, X.data(), n), cols, "mxfp4 frag");
  for (int t = 0; t < n; t++) {
    Dev<float> y1(rows);
    const cuda::MxTask one{f.packed.p, f.scale.p, dx.p + size_t(t) * cols, y1.p, 1};
    cuda::grouped_mxfp4_frag(&one, 1, rows, cols);
    const std::vector<float> y = y1.get();
    ASSERT_EQ(0, std::memcmp(y.data(), got.data() + size_t(t) * rows, rows * sizeof(float))) << "token " << t;
  }
}

TEST(CudaFrag, RandomShapesMatchRef) {
  SKIP_WITHOUT_GPU();
  Rng rng(128);
  // Partial 32-row units, one row, the narrowest and widest widths, 1-5 tokens.
  check_frag(rng, 1, 1024, 1);
  check_frag(rng, 31, 1024, 2);
  check_frag(rng, 33, 1152, 3);
  check_frag(rng, 100, 2048, 5);
  check_frag(rng, 77, 7168, 2);
  std::uniform_int_distribution<int> rows(1, 300), steps(8, 40), tokens(1, 4);
  for (int i = 0; i < 6; i++) check_frag(rng, rows(rng), 128 * steps(rng), tokens(rng));
}

TEST(CudaFrag, K3ExpertShapes) {
  SKIP_WITHOUT_GPU();
  Rng rng(3072);
  check_frag(rng, 3072, 3584, 1);  // w1, w3
  check_frag(rng, 3584, 3072, 3);  // w2, a few prefill tokens
}

TEST(CudaFrag, ExtremeScales) {
  SKIP_WITHOUT_GPU();
  Rng rng(9);
  check_frag(rng, 45, 1024, 2, 0, 40);     // down to the subnormal 2^-127
  check_frag(rng, 45, 1024, 2, 200, 230);  // large, finite
}

// One-hot x: y[r] is exactly value(code)·2^(s-127) for every code and every
// scale 0..254 (the subnormal s = 0, overflow to inf at the top), at columns
// of every lane, step and warp.
TEST(CudaFrag, DecodesEveryCodeAndScaleExactly) {
  SKIP_WITHOUT_GPU();
  const int cols = 1024, rows = 255 * 16;
  const Mxfp4 m = every_code_and_scale(cols);
  Dev<uint8_t> dp(m.packed), ds(m.scale);
  const FragCopy f(dp, ds, rows, cols);
  for (int hot : {0, 1, 31, 32, 127, 128, 500, cols - 1}) {
    std::vector<float> x(cols, 0.0f);
    x[hot] = 1.0f;
    Dev<float> dx(x), dy(rows);
    const cuda::MxTask task{f.packed.p, f.scale.p, dx.p, dy.p, 1};
    cuda::grouped_mxfp4_frag(&task, 1, rows, cols);
    expect_every_code_exact(dy.get(), "hot " + std::to_string(hot));
  }
}

// A grouped call (70 experts: two launches; 0-4 tokens each, rows not a
// multiple of 32) is bitwise the same calls made one by one: the launch's
// grid does not enter the bits.
TEST(CudaFrag, GroupedIsBitwiseOneByOne) {
  SKIP_WITHOUT_GPU();
  check_grouped_one_by_one(100, 1024, true);
}

TEST(CudaFrag, RejectsShapesItDoesNotTake) {
  SKIP_WITHOUT_GPU();
  EXPECT_TRUE(cuda::mxfp4_frag_takes(3072, 3584));
  EXPECT_TRUE(cuda::mxfp4_frag_takes(1, 1024));
  EXPECT_FALSE(cuda::mxfp4_frag_takes(64, 896));   // fewer steps than warps
  EXPECT_FALSE(cuda::mxfp4_frag_takes(64, 1056));  // cols % 128
  EXPECT_FALSE(cuda::mxfp4_frag_takes(64, 7296));  // too wide
  EXPECT_FALSE(cuda::mxfp4_frag_takes(0, 1024));
  Dev<uint8_t> p(65536), s(4096);
  Dev<float> x(2048), y(64);
  const cuda::MxTask bad{p.p, s.p, x.p, y.p, 1};
  EXPECT_THROW(cuda::grouped_mxfp4_frag(&bad, 1, 64, 896), std::invalid_argument);
  EXPECT_THROW(cuda::mxfp4_frag_packed(p.p, 64, 1056, p.p), std::invalid_argument);
  const cuda::MxTask misaligned{p.p, s.p + 2, x.p, y.p, 1};
  EXPECT_THROW(cuda::grouped_mxfp4_frag(&misaligned, 1, 32, 1024), std::invalid_argument);
}

void check_bf16(Rng& rng, int rows, int cols, int n) {
  SCOPED_TRACE(testing::Message() << rows << "x" << cols << " n=" << n);
  const std::vector<uint16_t> W = random_bf16(rng, size_t(rows) * cols);
  const std::vector<float> X = random_activations(rng, size_t(n) * cols);
  std::vector<float> want(size_t(n) * rows);
  ref::matmul_bf16(W.data(), rows, cols, X.data(), n, want.data());
  std::vector<double> abs_sum(want.size());
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++)
      for (int c = 0; c < cols; c++)
        abs_sum[size_t(t) * rows + r] += std::fabs(double(bf16_to_f32(W[size_t(r) * cols + c])) * X[size_t(t) * cols + c]);
  Dev<uint16_t> dw(W);
  Dev<float> dx(X), dy(want.size());
  cuda::matmul_bf16(dw.p, rows, cols, dx.p, n, dy.p);
  const std::vector<float> got = dy.get();
  expect_close(got, want, abs_sum, cols, "bf16");
  for (int t = 0; t < n; t++) {
    Dev<float> y1(rows);
    cuda::matvec_bf16(dw.p, rows, cols, dx.p + size_t(t) * cols, y1.p);
    ASSERT_EQ(0, std::memcmp(y1.get().data(), got.data() + size_t(t) * rows, rows * sizeof(float))) << "token " << t;
  }
}

TEST(CudaKernels, Bf16RandomShapesMatchRef) {
  SKIP_WITHOUT_GPU();
  Rng rng(5);
  std::uniform_int_distribution<int> rows(1, 200), cols(1, 1500), tokens(1, 9);
  for (int i = 0; i < 12; i++) check_bf16(rng, rows(rng), cols(rng), tokens(rng));  // odd widths too
  check_bf16(rng, 64, 7168, 5);
  check_bf16(rng, 3584, 7168, 1);  // routed_expert_down_proj
}

// The decode launch's shape changes the speed only: every tuning gives the
// default's bits, and a pass of several tokens (another shape) the same.
TEST(CudaKernels, Bf16TuningsKeepTheBits) {
  SKIP_WITHOUT_GPU();
  Rng rng(11);
  const cuda::Bf16Tuning standard = cuda::bf16_tuning();
  struct Restore {
    cuda::Bf16Tuning t;
    ~Restore() { cuda::set_bf16_tuning(t); }
  } restore{standard};
  for (const auto [rows, cols, n] : {std::array{37, 1000, 3}, std::array{130, 7168, 5}, std::array{3584, 7168, 1},
                                     std::array{9, 33, 2}, std::array{1, 4104, 1}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols << " n=" << n);
    Dev<uint16_t> dw(random_bf16(rng, size_t(rows) * cols));
    Dev<float> dx(random_activations(rng, size_t(n) * cols)), want(size_t(n) * rows), got(size_t(n) * rows);
    cuda::set_bf16_tuning(standard);
    cuda::matmul_bf16(dw.p, rows, cols, dx.p, n, want.p);
    const std::vector<float> wanted = want.get();
    for (const cuda::Bf16Tuning t : cuda::bf16_tunings()) {
      cuda::set_bf16_tuning(t);
      for (int k = 0; k < n; k++) {  // one token at a time: the tuning's launches
        Dev<float> y(rows);
        y.poison();
        cuda::matvec_bf16(dw.p, rows, cols, dx.p + size_t(k) * cols, y.p);
        ASSERT_EQ(0, std::memcmp(y.get().data(), wanted.data() + size_t(k) * rows, rows * sizeof(float)))
            << t.rows << " rows, " << t.ahead << " ahead, token " << k;
      }
      got.poison();
      cuda::matmul_bf16(dw.p, rows, cols, dx.p, n, got.p);
      ASSERT_TRUE(bitwise_equal(wanted, got.get())) << t.rows << " rows, " << t.ahead << " ahead";
    }
  }
  EXPECT_THROW(cuda::set_bf16_tuning({3, 2}), std::invalid_argument);
}

// Programmatic dependent launch: each GEMV of a chain reads the one before's
// output (the wait must cover it) and the next overwrites a buffer the one
// before is still reading; the chain queued back to back gives the same bits
// with PDL and without, and never a value read before it was written (the
// buffers start as NaN). bf16 and MXFP4 decode launches alternate, so each
// kernel follows the other.
TEST(CudaKernels, DependentLaunchesKeepTheirOrder) {
  SKIP_WITHOUT_GPU();
  Rng rng(17);
  const int n = 2048, steps = 12;  // square: y_{k+1} = W_k y_k
  // bf16 weights N(0, 1/n); MXFP4 codes uniform (E[d^2] ~ 8.6) at scale 2^-7:
  // the values stay O(1) along the chain.
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(n)));
  std::deque<Dev<uint16_t>> dw;
  std::deque<Dev<uint8_t>> dp, ds;
  for (int k = 0; k < steps; k++) {
    if (k % 2 == 0) {
      std::vector<uint16_t> w(size_t(n) * n);
      for (uint16_t& v : w) v = f32_to_bf16(normal(rng));
      dw.emplace_back(w);
    } else {
      const Mxfp4 m = random_mxfp4(rng, n, n, 120, 120);
      dp.emplace_back(m.packed);
      ds.emplace_back(m.scale);
    }
  }
  const std::vector<float> x = random_activations(rng, n);
  struct PdlGuard {  // the process-wide default back, however the test ends
    ~PdlGuard() { cuda::set_pdl(true); }
  } guard;
  std::vector<float> results[2];
  for (int pdl = 0; pdl < 2; pdl++) {
    cuda::set_pdl(pdl == 1);
    Dev<float> a(x), b(n);
    for (int k = 0; k < steps; k++) {
      float* in = k % 2 ? b.p : a.p;
      float* out = k % 2 ? a.p : b.p;
      if (k % 2 == 0)
        cuda::matvec_bf16(dw[size_t(k / 2)].p, n, n, in, out);
      else
        cuda::matvec_mxfp4(dp[size_t(k / 2)].p, ds[size_t(k / 2)].p, n, n, in, out);
    }
    results[pdl] = (steps % 2 ? b : a).get();
  }
  ASSERT_EQ(0, std::memcmp(results[0].data(), results[1].data(), n * sizeof(float)));
  bool finite = true;
  for (float v : results[1]) finite = finite && std::isfinite(v);
  EXPECT_TRUE(finite) << "the chain overflowed: the comparison would be of infinities";
}

TEST(CudaKernels, RmsnormRowsMatchRef) {
  SKIP_WITHOUT_GPU();
  Rng rng(9);
  for (int width : {1, 7, 256, 1000, 7168}) {
    const int n = 5;
    const std::vector<float> X = random_activations(rng, size_t(n) * width);
    std::vector<float> w = random_activations(rng, width), want(X.size());
    for (int t = 0; t < n; t++) ref::rmsnorm(X.data() + size_t(t) * width, w.data(), width, 1e-6f, want.data() + size_t(t) * width);
    Dev<float> dx(X), dw(w), dy(X.size());
    cuda::rmsnorm_rows(dx.p, dw.p, n, width, 1e-6f, dy.p);
    const std::vector<float> got = dy.get();
    for (size_t i = 0; i < got.size(); i++)
      ASSERT_NEAR(got[i], want[i], 2e-5 * std::fabs(want[i]) + 1e-30) << "width " << width << " at " << i;
  }
}

TEST(CudaKernels, SituGluMatchesRef) {
  SKIP_WITHOUT_GPU();
  Rng rng(10);
  const int n = 100000;
  const std::vector<float> g = random_activations(rng, n), u = random_activations(rng, n);
  std::vector<float> want(n);
  ref::situ_glu(g.data(), u.data(), n, 4.0f, 6.0f, want.data());
  Dev<float> dg(g), du(u);
  cuda::situ_glu(dg.p, du.p, n, 4.0f, 6.0f, dg.p);  // in place, as the model calls it
  const std::vector<float> got = dg.get();
  for (int i = 0; i < n; i++) ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-37) << i;
}

// K3.1 Pro's indexer scores: bitwise dsa::scores_scalar, row t's positions
// 0..base+t, at K3.1's 32 × 128 and small odd shapes; NaN and negative dot
// products (ReLU to 0) included; positions past a row's end untouched.
TEST(CudaKernels, DsaScoresAreBitwiseScalar) {
  SKIP_WITHOUT_GPU();
  Rng rng(11);
  for (const auto& [heads, dim] : std::vector<std::pair<int, int>>{{32, 128}, {3, 20}, {1, 1}, {9, 33}})
    for (const int64_t base : {int64_t(0), int64_t(31), int64_t(2500)}) {
      const int T = 3, ld = int(base + T);
      std::vector<float> qi = random_activations(rng, size_t(T) * heads * dim);
      std::vector<float> w = random_activations(rng, size_t(T) * heads);
      std::vector<float> keys = random_activations(rng, size_t(ld) * dim);
      keys[size_t(ld / 2) * dim] = std::numeric_limits<float>::quiet_NaN();  // one position's dot products: NaN
      Dev<float> dq(qi), dw(w), dk(keys), ds(size_t(T) * ld);
      cuda::dsa_scores(heads, dim, base, T, dq.p, dw.p, dk.p, ld, ds.p);
      const std::vector<float> got = ds.get();
      for (int t = 0; t < T; t++) {
        const int64_t n = base + t + 1;
        std::vector<float> want(static_cast<size_t>(n));
        dsa::scores_scalar(qi.data() + size_t(t) * heads * dim, w.data() + size_t(t) * heads, keys.data(), heads, dim,
                           n, want.data());
        ASSERT_EQ(std::memcmp(want.data(), got.data() + size_t(t) * ld, size_t(n) * sizeof(float)), 0)
            << heads << "x" << dim << " base " << base << " row " << t;
        for (int64_t s = n; s < ld; s++) ASSERT_TRUE(std::isnan(got[size_t(t) * ld + size_t(s)])) << "written past";
      }
    }
}

TEST(CudaKernels, DeviceIsNamed) {
  SKIP_WITHOUT_GPU();
  EXPECT_NE(std::string(cuda::device_name()).find("sm_"), std::string::npos);
}


// The uploader: pinned and pageable sources, several chunks and an odd
// tail, the staging slots reused many times; a consumer stream fenced on it
// sees every byte.
TEST(CudaUpload, PinnedAndPageableSourcesArriveWhole) {
  SKIP_WITHOUT_GPU();
  Rng rng(5);
  const size_t n = 10 * 4096 + 1234;
  std::vector<uint8_t> src(n);
  for (auto& b : src) b = uint8_t(rng());
  uint8_t* pinned = nullptr;
  ok(cudaHostAlloc(reinterpret_cast<void**>(&pinned), n, cudaHostAllocDefault));
  std::memcpy(pinned, src.data(), n);
  for (const bool is_pinned : {true, false}) {
    cuda::Uploader up(4096, 2);
    Dev<uint8_t> a(n), b(n);
    up.copy(a.p, is_pinned ? pinned : src.data(), n, is_pinned);
    up.copy(b.p, is_pinned ? pinned : src.data(), n, is_pinned);
    cudaStream_t s = nullptr;
    ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    up.fence(s);
    Dev<uint8_t> c(n);
    ok(cudaMemcpyAsync(c.p, b.p, n, cudaMemcpyDeviceToDevice, s));  // ordered after the uploads
    ok(cudaStreamSynchronize(s));
    ok(cudaStreamDestroy(s));
    EXPECT_EQ(a.get(), src) << (is_pinned ? "pinned" : "pageable");
    EXPECT_EQ(c.get(), src) << (is_pinned ? "pinned" : "pageable");
  }
  cudaFreeHost(pinned);
}

}  // namespace
}  // namespace sluice
