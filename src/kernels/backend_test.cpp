// Every op of every backend entry (kernels/backend.h: backends()) against the
// scalar entry on random inputs: bitwise where the contract says so, within
// 1e-5·Σ|w·x| per dot product otherwise. A new entry is tested by adding it to
// backends(). Then the scalar entry's model-level ops against independent
// formulas (double precision, or properties the contract promises).
#include "kernels/backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/numeric.h"
#include "kernels/device.h"
#include "kernels/kernel_test_util.h"
#include "kernels/ref.h"

namespace sluice {
namespace {

using namespace kernel_test;

std::vector<float> randn(Rng& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng) * scale;
  return v;
}

// Σ_c |W[r,c]·X[t,c]| for every (t, r), W given as a dequantized row function.
std::vector<double> abs_dots(int rows, int cols, const std::vector<float>& X, int n, auto weight) {
  std::vector<double> s(size_t(n) * rows);
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++)
      for (int c = 0; c < cols; c++) s[size_t(t) * rows + r] += std::fabs(double(weight(r, c)) * X[size_t(t) * cols + c]);
  return s;
}

// A null parameter is the CUDA entry (kernels/device.h): it runs when this
// build has CUDA and a GPU is usable, and skips otherwise.
class BackendOps : public ::testing::TestWithParam<const Backend*> {
 protected:
  void SetUp() override {
    entry_ = GetParam();
    if (!entry_) {
      try {
        entry_ = &device_backend("cuda");
      } catch (const Error& e) {
        GTEST_SKIP() << e.what();
      }
    }
  }
  const Backend& be() const { return *entry_; }
  const Backend* entry_ = nullptr;
  const Backend& sc() const { return scalar_backend(); }
};

TEST_P(BackendOps, Bf16Products) {
  Rng rng(11);
  std::uniform_int_distribution<int> R(1, 70), Cn(1, 300), N(1, 5);
  for (int iter = 0; iter < 20; iter++) {
    const int rows = R(rng), cols = Cn(rng), n = N(rng);
    auto W = random_bf16(rng, size_t(rows) * cols);
    auto X = randn(rng, size_t(n) * cols);
    const Bf16Ref ref{W.data(), rows, cols, 0};
    std::vector<float> want(size_t(n) * rows), mm(want.size()), mv(want.size());
    sc().matmul_bf16(ref, X.data(), n, want.data());
    be().matmul_bf16(ref, X.data(), n, mm.data());
    for (int t = 0; t < n; t++) be().matvec_bf16(ref, X.data() + size_t(t) * cols, mv.data() + size_t(t) * rows);
    ASSERT_TRUE(bitwise_equal(mm, mv)) << "matmul != matvec";
    auto s = abs_dots(rows, cols, X, n, [&](int r, int c) { return bf16_to_f32(W[size_t(r) * cols + c]); });
    for (size_t i = 0; i < want.size(); i++) ASSERT_NEAR(mm[i], want[i], tolerance(s[i], cols)) << i;
  }
}

TEST_P(BackendOps, Mxfp4ProductsAndGrouped) {
  Rng rng(12);
  std::uniform_int_distribution<int> R(1, 40), G(1, 9), N(0, 4);
  for (int iter = 0; iter < 10; iter++) {
    const int rows = R(rng), cols = 32 * G(rng);
    // A grouped call of 3 experts, one with no rows.
    std::vector<Mxfp4> m;
    std::vector<std::vector<float>> X, want, got;
    std::vector<Mxfp4Task> tasks;
    for (int e = 0; e < 3; e++) {
      const int n = e == 1 ? 0 : std::max(1, N(rng));
      m.push_back(random_mxfp4(rng, rows, cols, 120, 130));
      X.push_back(randn(rng, size_t(n) * cols));
      want.emplace_back(size_t(n) * rows);
      got.emplace_back(size_t(n) * rows, NAN);
    }
    for (int e = 0; e < 3; e++) {
      const Mxfp4Ref W{m[e].packed.data(), m[e].scale.data(), rows, cols, 0};
      const int n = int(X[e].size() / cols);
      tasks.push_back({W, X[e].data(), got[e].data(), n});
      if (n == 0) continue;
      sc().matmul_mxfp4(W, X[e].data(), n, want[e].data());
      std::vector<float> mm(size_t(n) * rows), mv(mm.size());
      be().matmul_mxfp4(W, X[e].data(), n, mm.data());
      for (int t = 0; t < n; t++) be().matvec_mxfp4(W, X[e].data() + size_t(t) * cols, mv.data() + size_t(t) * rows);
      ASSERT_TRUE(bitwise_equal(mm, mv)) << "matmul != matvec";
      std::vector<std::vector<float>> Wd(rows, std::vector<float>(cols));
      for (int r = 0; r < rows; r++) ref::dequant_mxfp4_row(W.packed, W.scale, cols, r, Wd[r].data());
      auto s = abs_dots(rows, cols, X[e], n, [&](int r, int c) { return Wd[r][c]; });
      for (size_t i = 0; i < mm.size(); i++) ASSERT_NEAR(mm[i], want[e][i], tolerance(s[i], cols)) << i;
      want[e] = mm;  // grouped must equal this entry's own matmul bitwise
    }
    be().grouped_mxfp4(tasks.data(), int(tasks.size()));
    for (int e = 0; e < 3; e++) ASSERT_TRUE(bitwise_equal(got[e], want[e])) << "grouped != matmul, expert " << e;
  }
}

TEST_P(BackendOps, Int8Products) {
  Rng rng(14);
  std::uniform_int_distribution<int> R(1, 70), Cn(1, 600), N(1, 6);
  for (int iter = 0; iter < 20; iter++) {
    const int rows = R(rng), cols = Cn(rng), n = N(rng);
    const auto W = random_int8(rng, rows, cols);
    const auto X = random_activations(rng, size_t(n) * cols);
    const Int8Ref ref{W.data(), rows, cols, 0};
    std::vector<float> want(size_t(n) * rows), mm(want.size(), NAN), mv(want.size(), NAN);
    sc().matmul_int8(ref, X.data(), n, want.data());
    be().matmul_int8(ref, X.data(), n, mm.data());
    for (int t = 0; t < n; t++) be().matvec_int8(ref, X.data() + size_t(t) * cols, mv.data() + size_t(t) * rows);
    ASSERT_TRUE(bitwise_equal(mm, mv)) << "matmul != matvec";
    std::vector<float> row(cols);
    std::vector<std::vector<float>> Wd;
    for (int r = 0; r < rows; r++) {
      ref::dequant_int8_row(W.data(), cols, r, row.data());
      Wd.push_back(row);
    }
    auto s = abs_dots(rows, cols, X, n, [&](int r, int c) { return Wd[r][c]; });
    for (size_t i = 0; i < want.size(); i++) ASSERT_NEAR(mm[i], want[i], tolerance(s[i], cols)) << i;
  }
}

TEST_P(BackendOps, RowOpsAreBitwiseScalar) {
  Rng rng(13);
  const int n = 5, width = 37, ld = 41;
  auto X = randn(rng, size_t(n) * ld, 3.0f), w = randn(rng, width);
  std::vector<float> a(size_t(n) * ld, 7.0f), b(a);
  sc().rmsnorm_rows(X.data(), ld, {w.data(), 0}, n, width, 1e-5f, a.data(), ld);
  be().rmsnorm_rows(X.data(), ld, {w.data(), 0}, n, width, 1e-5f, b.data(), ld);
  EXPECT_TRUE(bitwise_equal(a, b)) << "rmsnorm_rows";
  b = X;  // in place
  be().rmsnorm_rows(b.data(), ld, {w.data(), 0}, n, width, 1e-5f, b.data(), ld);
  for (int t = 0; t < n; t++)
    for (int j = 0; j < ld; j++) {
      const size_t i = size_t(t) * ld + j;
      EXPECT_EQ(std::memcmp(&b[i], j < width ? &a[i] : &X[i], 4), 0) << "in place, row " << t << " col " << j;
    }

  auto y0 = randn(rng, 301), x = randn(rng, 301);
  a = y0, b = y0;
  sc().add(a.data(), x.data(), x.size());
  be().add(b.data(), x.data(), x.size());
  EXPECT_TRUE(bitwise_equal(a, b)) << "add";

  for (size_t n : {size_t(301), size_t(3 * 3072 + 7)}) {  // the second is split over the pool (avx2)
    auto g = randn(rng, n, 4.0f), u = randn(rng, n, 4.0f);
    a.assign(n, 0), b.assign(n, 0);
    sc().situ_glu(g.data(), u.data(), g.size(), 3.0f, 10.0f, a.data());
    be().situ_glu(g.data(), u.data(), g.size(), 3.0f, 10.0f, b.data());
    EXPECT_TRUE(bitwise_equal(a, b)) << "situ_glu, n " << n;
    be().situ_glu(g.data(), u.data(), g.size(), 3.0f, 10.0f, g.data());  // out aliases g
    EXPECT_TRUE(bitwise_equal(g, a)) << "situ_glu in place, n " << n;
  }
}

TEST_P(BackendOps, AttnResIsBitwiseScalar) {
  Rng rng(14);
  const int T = 3, H = 29;
  for (int nsrc : {1, 2, 5}) {
    std::vector<std::vector<float>> src;
    std::vector<const float*> ptr;
    for (int j = 0; j < nsrc; j++) src.push_back(randn(rng, size_t(T) * H, float(j + 1)));
    for (auto& s : src) ptr.push_back(s.data());
    auto u = randn(rng, H);
    std::vector<float> a(size_t(T) * H), b(a.size(), NAN);
    sc().attn_res(ptr.data(), nsrc, {u.data(), 0}, T, H, 1e-5f, a.data());
    be().attn_res(ptr.data(), nsrc, {u.data(), 0}, T, H, 1e-5f, b.data());
    EXPECT_TRUE(bitwise_equal(a, b)) << nsrc << " sources";
  }
}

TEST_P(BackendOps, RouteAndCombineAreBitwiseScalar) {
  Rng rng(15);
  const int T = 4, E = 33, K = 6, W = 19;
  auto logits = randn(rng, size_t(T) * E, 2.0f), bias = randn(rng, E, 0.1f);
  logits[3] = logits[7];  // a tie in the biased score
  bias[3] = bias[7];
  std::vector<int> ia(size_t(T) * K), ib(ia.size(), -1);
  std::vector<float> wa(ia.size()), wb(ia.size(), NAN);
  sc().route(logits.data(), {bias.data(), 0}, T, E, K, 2.5f, ia.data(), wa.data());
  be().route(logits.data(), {bias.data(), 0}, T, E, K, 2.5f, ib.data(), wb.data());
  EXPECT_EQ(ia, ib);
  EXPECT_TRUE(bitwise_equal(wa, wb)) << "route weights";

  auto eo = randn(rng, size_t(T) * K * W);
  std::vector<float> ca(size_t(T) * W), cb(ca.size(), NAN);
  sc().moe_combine(eo.data(), ia.data(), wa.data(), T, K, W, ca.data());
  be().moe_combine(eo.data(), ia.data(), wa.data(), T, K, W, cb.data());
  EXPECT_TRUE(bitwise_equal(ca, cb)) << "moe_combine";
}

// Small KDA shapes: heads, dim, kernel.
struct KdaCase {
  KdaDims d;
  std::vector<float> qc, kc, vc, a, dt, on;
  KdaParams p() const { return {qc.data(), kc.data(), vc.data(), a.data(), dt.data(), on.data(), 0}; }
};
KdaCase kda_case(Rng& rng) {
  KdaCase k;
  k.d = {3, 8, 4, 1e-5f, -5.0f};
  const int C = 24;
  k.qc = randn(rng, size_t(C) * 4, 0.5f), k.kc = randn(rng, size_t(C) * 4, 0.5f), k.vc = randn(rng, size_t(C) * 4, 0.5f);
  k.a = randn(rng, 3), k.dt = randn(rng, C), k.on = randn(rng, 8);
  for (float& v : k.a) v = std::exp(v);
  return k;
}

TEST_P(BackendOps, KdaChunkIsBitwiseScalar) {
  Rng rng(16);
  KdaCase k = kda_case(rng);
  const int T = 5, C = 24, NH = 3, D = 8;
  auto q = randn(rng, size_t(T) * C), kk = randn(rng, size_t(T) * C), v = randn(rng, size_t(T) * C);
  auto f = randn(rng, size_t(T) * C), beta = randn(rng, size_t(T) * NH), z = randn(rng, size_t(T) * C);
  const KdaRows in{q.data(), kk.data(), v.data(), f.data(), beta.data(), z.data()};
  const auto S0 = randn(rng, size_t(NH) * D * D, 0.3f), conv0 = randn(rng, size_t(3) * 3 * C);
  // From a separate pre-chunk buffer (the undo path) and in place.
  for (bool separate : {true, false}) {
    std::vector<float> Sa = separate ? std::vector<float>(S0.size(), NAN) : S0, Sb = Sa;
    std::vector<float> ca = conv0, cb = conv0, oa(size_t(T) * C), ob(oa.size(), NAN);
    sc().kda_chunk(k.d, k.p(), separate ? S0.data() : Sa.data(), Sa.data(), ca.data(), T, in, oa.data(), nullptr);
    be().kda_chunk(k.d, k.p(), separate ? S0.data() : Sb.data(), Sb.data(), cb.data(), T, in, ob.data(), nullptr);
    EXPECT_TRUE(bitwise_equal(Sa, Sb) && bitwise_equal(ca, cb) && bitwise_equal(oa, ob)) << "separate=" << separate;
    // State alone (a replay): the same state bits.
    std::vector<float> Sc = S0, cc = conv0;
    be().kda_chunk(k.d, k.p(), Sc.data(), Sc.data(), cc.data(), T, in, nullptr, nullptr);
    EXPECT_TRUE(bitwise_equal(Sc, Sa) && bitwise_equal(cc, ca)) << "replay, separate=" << separate;
  }
}

// Heads wider than a device block's threads (a stride), K3's conv kernel.
TEST_P(BackendOps, KdaWideHeadsAreBitwiseScalar) {
  Rng rng(19);
  for (const int D : {128, 160}) {
    const int NH = 2, C = NH * D, K = 4, T = 2;
    const KdaDims d{NH, D, K, 1e-6f, -5.0f};
    auto qc = randn(rng, size_t(C) * K, 0.5f), kc = randn(rng, size_t(C) * K, 0.5f),
         vc = randn(rng, size_t(C) * K, 0.5f);
    auto a = randn(rng, NH), dt = randn(rng, C), on = randn(rng, D);
    for (float& x : a) x = std::exp(x);
    const KdaParams p{qc.data(), kc.data(), vc.data(), a.data(), dt.data(), on.data(), 0};
    auto q = randn(rng, size_t(T) * C), kk = randn(rng, size_t(T) * C), v = randn(rng, size_t(T) * C);
    auto f = randn(rng, size_t(T) * C), beta = randn(rng, size_t(T) * NH), z = randn(rng, size_t(T) * C);
    const KdaRows in{q.data(), kk.data(), v.data(), f.data(), beta.data(), z.data()};
    std::vector<float> Sa = randn(rng, size_t(NH) * D * D, 0.1f), Sb = Sa, ca(size_t(3) * (K - 1) * C, 0.0f), cb = ca;
    std::vector<float> oa(size_t(T) * C), ob(oa.size(), NAN);
    sc().kda_chunk(d, p, Sa.data(), Sa.data(), ca.data(), T, in, oa.data(), nullptr);
    be().kda_chunk(d, p, Sb.data(), Sb.data(), cb.data(), T, in, ob.data(), nullptr);
    EXPECT_TRUE(bitwise_equal(Sa, Sb) && bitwise_equal(ca, cb) && bitwise_equal(oa, ob)) << "D=" << D;
  }
}

// A sequence's life with stamps (backend.h: StateStamp), against the scalar
// entry without them: fresh, continued (a device entry's copy in VRAM), a
// snapshot restored after its copy moved on, a state changed on the host
// (stamp 0), a chunk with an undo record and its rollback, a second sequence
// beside the first. Every state, conv and output bitwise the scalar's.
TEST_P(BackendOps, KdaStampsKeepTheScalarBits) {
  Rng rng(18);
  KdaCase k = kda_case(rng);
  const int C = 24, NH = 3, D = 8, T = 3;
  struct Seq {
    std::vector<float> S, conv;
    uint64_t stamp = 0;
  };
  auto fresh = [&] { return Seq{randn(rng, size_t(NH) * D * D, 0.3f), randn(rng, size_t(3) * 3 * C), 0}; };
  // One chunk of n positions on both: `ref` by the scalar entry, `got` by this one.
  auto chunk = [&](Seq& ref, Seq& got, int n, const char* what) {
    auto q = randn(rng, size_t(n) * C), kk = randn(rng, size_t(n) * C), v = randn(rng, size_t(n) * C);
    auto f = randn(rng, size_t(n) * C), beta = randn(rng, size_t(n) * NH), z = randn(rng, size_t(n) * C);
    const KdaRows in{q.data(), kk.data(), v.data(), f.data(), beta.data(), z.data()};
    std::vector<float> oa(size_t(n) * C), ob(oa.size(), NAN);
    sc().kda_chunk(k.d, k.p(), ref.S.data(), ref.S.data(), ref.conv.data(), n, in, oa.data(), nullptr);
    StateStamp st{got.stamp};
    be().kda_chunk(k.d, k.p(), got.S.data(), got.S.data(), got.conv.data(), n, in, ob.data(), &st);
    got.stamp = st.to;
    EXPECT_TRUE(bitwise_equal(ref.S, got.S) && bitwise_equal(ref.conv, got.conv) && bitwise_equal(oa, ob)) << what;
  };
  Seq a = fresh(), ga = a;
  chunk(a, ga, T, "fresh");
  chunk(a, ga, 1, "continued");
  chunk(a, ga, 1, "continued again");
  const Seq snap = a, gsnap = ga;
  chunk(a, ga, 2, "after the snapshot");
  a = snap, ga = gsnap;
  chunk(a, ga, 1, "restored snapshot");
  Seq b = fresh(), gb = b;
  chunk(b, gb, 2, "second sequence");
  chunk(a, ga, 1, "first again");
  a.S[5] += 1.0f, ga.S[5] += 1.0f, ga.stamp = 0;
  chunk(a, ga, 1, "changed on the host");
  // An undo record: the chunk decays from the pre-chunk buffer into another,
  // then a rollback to `keep` positions replays in place from the pre-chunk bits.
  for (int keep : {0, 2}) {
    const int n = 3;
    auto q = randn(rng, size_t(n) * C), kk = randn(rng, size_t(n) * C), v = randn(rng, size_t(n) * C);
    auto f = randn(rng, size_t(n) * C), beta = randn(rng, size_t(n) * NH), z = randn(rng, size_t(n) * C);
    const KdaRows in{q.data(), kk.data(), v.data(), f.data(), beta.data(), z.data()};
    std::vector<float> oa(size_t(n) * C), ob(oa.size(), NAN), Sa(a.S.size(), NAN), Sb(Sa.size(), NAN);
    const std::vector<float> conv_a = a.conv, conv_b = ga.conv;
    sc().kda_chunk(k.d, k.p(), a.S.data(), Sa.data(), a.conv.data(), n, in, oa.data(), nullptr);
    StateStamp st{ga.stamp};
    be().kda_chunk(k.d, k.p(), ga.S.data(), Sb.data(), ga.conv.data(), n, in, ob.data(), &st);
    EXPECT_TRUE(bitwise_equal(Sa, Sb) && bitwise_equal(a.conv, ga.conv) && bitwise_equal(oa, ob)) << "undo chunk";
    // Rollback: the pre-chunk state (a.S / ga.S untouched, stamp ga.stamp) replays `keep` positions.
    a.conv = conv_a, ga.conv = conv_b;
    const KdaRows replay{q.data(), kk.data(), v.data(), f.data(), beta.data(), nullptr};
    sc().kda_chunk(k.d, k.p(), a.S.data(), a.S.data(), a.conv.data(), keep, replay, nullptr, nullptr);
    StateStamp rs{ga.stamp};
    be().kda_chunk(k.d, k.p(), ga.S.data(), ga.S.data(), ga.conv.data(), keep, replay, nullptr, &rs);
    ga.stamp = rs.to;
    EXPECT_TRUE(bitwise_equal(a.S, ga.S) && bitwise_equal(a.conv, ga.conv)) << "rollback keep=" << keep;
    chunk(a, ga, 1, "after the rollback");
  }
  chunk(b, gb, 1, "second sequence again");
}

TEST_P(BackendOps, MlaAttendCloseToScalar) {
  Rng rng(17);
  // Small shapes, and K3's per-head shapes (4 of its 64 heads).
  for (const MlaDims d : {MlaDims{3, 8, 4, 6, 40}, MlaDims{4, 128, 64, 128, 512}})
    for (int64_t base : {0, 7}) {
      const int QH = d.nope + d.rope, KVW = d.kv_lora + d.rope, KVB = d.nope + d.v_dim;
      auto kv_b = random_bf16(rng, size_t(d.heads) * KVB * d.kv_lora);
      const int T = 3;
      auto cache = randn(rng, size_t(base + T) * KVW), q = randn(rng, size_t(T) * d.heads * QH);
      auto gate = randn(rng, size_t(T) * d.heads * d.v_dim);
      std::vector<float> a(size_t(T) * d.heads * d.v_dim), b(a.size(), NAN);
      const Bf16Ref W{kv_b.data(), d.heads * KVB, d.kv_lora, 0};
      sc().mla_attend(d, W, cache.data(), base, T, q.data(), gate.data(), a.data(), nullptr);
      be().mla_attend(d, W, cache.data(), base, T, q.data(), gate.data(), b.data(), nullptr);
      // Only U_h ĉ differs by order; ĉ is a convex mix of cache rows, so
      // |ĉ_j| <= max|c′| bounds each term.
      double cmax = 0;
      for (float c : cache) cmax = std::max(cmax, double(std::fabs(c)));
      for (int t = 0; t < T; t++)
        for (int h = 0; h < d.heads; h++)
          for (int r = 0; r < d.v_dim; r++) {
            double s = 0;
            for (int j = 0; j < d.kv_lora; j++)
              s += std::fabs(bf16_to_f32(kv_b[(size_t(h) * KVB + d.nope + r) * d.kv_lora + j])) * cmax;
            const size_t i = (size_t(t) * d.heads + h) * d.v_dim + r;
            ASSERT_NEAR(b[i], a[i], tolerance(s, d.kv_lora)) << "base=" << base << " t=" << t << " h=" << h;
          }
    }
}

// A latent cache's life with stamps (backend.h: StateStamp), against the same
// entry without them (same kernels: the same bits): chunks appended, past a
// device copy's first capacity (64 rows), a snapshot restored after its copy
// moved on, a cut back to a prefix (stamp kept) then appended, rows rewritten
// on the host (stamp 0), a second cache beside the first.
TEST_P(BackendOps, MlaStampsKeepTheBits) {
  Rng rng(20);
  const MlaDims d{3, 8, 4, 6, 40};
  const int QH = 12, KVW = 44, KVB = 14;
  auto kv_b = random_bf16(rng, size_t(d.heads) * KVB * d.kv_lora);
  const Bf16Ref W{kv_b.data(), d.heads * KVB, d.kv_lora, 0};
  struct Cache {
    std::vector<float> kv;
    int64_t len = 0;
    uint64_t stamp = 0;
  };
  // Appends n rows to c and attends; the same without a stamp must give the same bits.
  auto attend = [&](Cache& c, int n, const char* what) {
    const int64_t base = c.len;
    auto rows = randn(rng, size_t(n) * KVW);
    c.kv.insert(c.kv.end(), rows.begin(), rows.end());
    c.len += n;
    auto q = randn(rng, size_t(n) * d.heads * QH), gate = randn(rng, size_t(n) * d.heads * d.v_dim);
    std::vector<float> a(size_t(n) * d.heads * d.v_dim, NAN), b(a.size(), NAN);
    be().mla_attend(d, W, c.kv.data(), base, n, q.data(), gate.data(), a.data(), nullptr);
    StateStamp st{c.stamp};
    be().mla_attend(d, W, c.kv.data(), base, n, q.data(), gate.data(), b.data(), &st);
    c.stamp = st.to;
    EXPECT_TRUE(bitwise_equal(a, b)) << what << " at " << base;
  };
  Cache c;
  attend(c, 5, "fresh");
  for (int i = 0; i < 4; i++) attend(c, 1, "step");
  const Cache snap = c;
  attend(c, 60, "past the first capacity");
  attend(c, 1, "step after growing");
  Cache s2 = snap;
  attend(s2, 2, "restored snapshot");
  c.len -= 30, c.kv.resize(size_t(c.len) * KVW);
  attend(c, 3, "after a cut");
  c.kv[7] += 1.0f, c.stamp = 0;
  attend(c, 1, "rewritten on the host");
  Cache other;
  attend(other, 4, "second cache");
  attend(c, 1, "first again");
  attend(s2, 1, "snapshot again");
}

// ---- K3.1 Pro's ops (docs/k31-spec.md §3; kernels/dsa.h) -------------------

// Keys with a share of exact ties: some rows repeated, some all-negative
// products (score 0), so the tie rule decides at the top-k boundary.
std::vector<float> keys_with_ties(Rng& rng, int64_t n, int dim) {
  std::vector<float> k = randn(rng, size_t(n) * dim);
  for (int64_t s = 3; s < n; s += 5)
    std::copy(k.begin(), k.begin() + dim, k.begin() + std::ptrdiff_t(s * dim));
  return k;
}

TEST_P(BackendOps, LayerNormIsBitwiseScalar) {
  Rng rng(3);
  for (int width : {1, 7, 32, 128}) {
    const int n = 5;
    auto X = randn(rng, size_t(n) * width, 3.0f), g = randn(rng, size_t(width)), b = randn(rng, size_t(width));
    std::vector<float> want(X.size()), got(X.size());
    sc().layernorm_rows(X.data(), width, {g.data(), 0}, {b.data(), 0}, n, width, 1e-5f, want.data(), width);
    be().layernorm_rows(X.data(), width, {g.data(), 0}, {b.data(), 0}, n, width, 1e-5f, got.data(), width);
    ASSERT_TRUE(bitwise_equal(want, got)) << width;
    // Against the formula in double: mean 0, variance 1 before the affine part.
    for (int t = 0; t < n; t++) {
      double m = 0, v = 0;
      for (int j = 0; j < width; j++) m += X[size_t(t) * width + j];
      m /= width;
      for (int j = 0; j < width; j++) v += std::pow(X[size_t(t) * width + j] - m, 2);
      v /= width;
      for (int j = 0; j < width; j++) {
        const double y = (X[size_t(t) * width + j] - m) / std::sqrt(v + 1e-5) * g[size_t(j)] + b[size_t(j)];
        ASSERT_NEAR(want[size_t(t) * width + j], y, 1e-4 * (1 + std::fabs(y)));
      }
    }
  }
}

TEST_P(BackendOps, SelectIsBitwiseScalar) {
  Rng rng(5);
  for (const DsaDims d : {DsaDims{4, 32, 16}, DsaDims{3, 20, 7}, DsaDims{32, 128, 64}})
    for (int64_t base : {0, 5, 40, 300}) {
      const int T = 4;
      auto keys = keys_with_ties(rng, base + T, d.dim);
      auto qi = randn(rng, size_t(T) * d.heads * d.dim), w = randn(rng, size_t(T) * d.heads, 0.1f);
      std::vector<int> s1(size_t(T) * d.topk, -1), s2(s1), n1(T), n2(T);
      sc().dsa_select(d, qi.data(), w.data(), keys.data(), base, T, s1.data(), n1.data());
      be().dsa_select(d, qi.data(), w.data(), keys.data(), base, T, s2.data(), n2.data());
      ASSERT_EQ(n1, n2);
      ASSERT_EQ(s1, s2) << "base " << base;
      for (int t = 0; t < T; t++) {
        ASSERT_EQ(n1[size_t(t)], std::min<int64_t>(d.topk, base + t + 1));
        const int* sel = s1.data() + size_t(t) * d.topk;
        ASSERT_TRUE(std::is_sorted(sel, sel + n1[size_t(t)]));
        ASSERT_LE(sel[n1[size_t(t)] - 1], base + t);  // causal
      }
    }
}

// A selection narrower than the context (K3.1's top-k), the cache growing by
// steps and chunks far past twice that width with its stamp (the GPU keeps the
// latent cache in VRAM, sized by the context, not by the selection): each call
// equal to the scalar entry within the products' noise, and with or without
// the stamp the same bits.
TEST_P(BackendOps, SparseAttentionOverAGrowingStampedCache) {
  Rng rng(8);
  const MlaDims d{2, 8, 4, 6, 40};
  const int QH = d.nope + d.rope, KVW = d.kv_lora + d.rope, KVB = d.nope + d.v_dim, topk = 4;
  auto kv_b = random_bf16(rng, size_t(d.heads) * KVB * d.kv_lora);
  const Bf16Ref W{kv_b.data(), d.heads * KVB, d.kv_lora, 0};
  std::vector<float> cache;
  int64_t len = 0;
  uint64_t stamp = 0;
  auto attend = [&](int n) {
    const int64_t base = len;
    auto rows = randn(rng, size_t(n) * KVW);
    cache.insert(cache.end(), rows.begin(), rows.end());
    len += n;
    std::vector<int> sel(size_t(n) * topk, -1), nsel(n);
    for (int t = 0; t < n; t++) {  // ascending, the query's own position last
      const int64_t ctx = base + t + 1;
      int k = 0;
      for (int64_t p = std::max<int64_t>(0, ctx - topk); p < ctx; p++) sel[size_t(t) * topk + k++] = int(p);
      if (ctx > topk) sel[size_t(t) * topk] = int(rng() % uint64_t(ctx - topk + 1));
      nsel[size_t(t)] = k;
    }
    auto q = randn(rng, size_t(n) * d.heads * QH), gate = randn(rng, size_t(n) * d.heads * d.v_dim);
    std::vector<float> want(size_t(n) * d.heads * d.v_dim), a(want.size(), NAN), b(want.size(), NAN);
    sc().mla_attend_sparse(d, W, cache.data(), base, n, q.data(), gate.data(), sel.data(), nsel.data(), topk,
                           want.data(), nullptr);
    StateStamp st{stamp};
    be().mla_attend_sparse(d, W, cache.data(), base, n, q.data(), gate.data(), sel.data(), nsel.data(), topk,
                           a.data(), &st);
    stamp = st.to;
    be().mla_attend_sparse(d, W, cache.data(), base, n, q.data(), gate.data(), sel.data(), nsel.data(), topk,
                           b.data(), nullptr);
    ASSERT_TRUE(bitwise_equal(a, b)) << "at " << base;
    for (size_t i = 0; i < a.size(); i++) ASSERT_NEAR(want[i], a[i], 1e-4 * (1 + std::fabs(want[i]))) << base;
  };
  attend(5);
  for (int i = 0; i < 40; i++) attend(1);
  attend(60);
  attend(130);
  attend(1);
}

// Every position selected: the sparse attention is mla_attend, bit for bit,
// in every entry (the skip form of docs/k31-spec.md §3.3).
TEST_P(BackendOps, AllSelectedIsDenseMlaAttendBitwise) {
  Rng rng(7);
  const MlaDims d{3, 8, 4, 6, 40};
  const int QH = d.nope + d.rope, KVW = d.kv_lora + d.rope, KVB = d.nope + d.v_dim, T = 3;
  for (int64_t base : {0, 9}) {
    auto kv_b = random_bf16(rng, size_t(d.heads) * KVB * d.kv_lora);
    auto cache = randn(rng, size_t(base + T) * KVW), q = randn(rng, size_t(T) * d.heads * QH);
    auto gate = randn(rng, size_t(T) * d.heads * d.v_dim);
    const Bf16Ref W{kv_b.data(), d.heads * KVB, d.kv_lora, 0};
    const int ld = int(base + T);
    std::vector<int> sel(size_t(T) * ld), nsel(T);
    for (int t = 0; t < T; t++) {
      nsel[size_t(t)] = int(base + t + 1);
      std::iota(sel.begin() + t * ld, sel.begin() + t * ld + nsel[size_t(t)], 0);
    }
    std::vector<float> dense(size_t(T) * d.heads * d.v_dim), sparse(dense.size(), NAN);
    be().mla_attend(d, W, cache.data(), base, T, q.data(), gate.data(), dense.data(), nullptr);
    be().mla_attend_sparse(d, W, cache.data(), base, T, q.data(), gate.data(), sel.data(), nsel.data(), ld,
                           sparse.data(), nullptr);
    ASSERT_TRUE(bitwise_equal(dense, sparse)) << "base " << base;
    // A proper subset: equal to the scalar entry within the products' noise,
    // and to dense attention over a cache holding only the selected rows.
    for (int t = 0; t < T; t++) {
      int* s = sel.data() + t * ld;
      int k = 0;
      for (int i = 0; i < nsel[size_t(t)]; i++)
        if (i % 2 == 0 || i == nsel[size_t(t)] - 1) s[k++] = i;
      nsel[size_t(t)] = k;
    }
    std::vector<float> a(dense.size()), b(dense.size());
    sc().mla_attend_sparse(d, W, cache.data(), base, T, q.data(), gate.data(), sel.data(), nsel.data(), ld, a.data(),
                           nullptr);
    be().mla_attend_sparse(d, W, cache.data(), base, T, q.data(), gate.data(), sel.data(), nsel.data(), ld, b.data(),
                           nullptr);
    for (size_t i = 0; i < a.size(); i++) ASSERT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(a[i]))) << i;
    const int t = T - 1;  // the last query alone, over a cache of its selected rows
    std::vector<float> picked;
    for (int i = 0; i < nsel[size_t(t)]; i++)
      picked.insert(picked.end(), cache.begin() + sel[size_t(t * ld + i)] * KVW,
                    cache.begin() + (sel[size_t(t * ld + i)] + 1) * KVW);
    std::vector<float> one(size_t(d.heads) * d.v_dim);
    sc().mla_attend(d, W, picked.data(), nsel[size_t(t)] - 1, 1, q.data() + size_t(t) * d.heads * QH,
                    gate.data() + size_t(t) * d.heads * d.v_dim, one.data(), nullptr);
    ASSERT_TRUE(bitwise_equal(one, std::vector<float>(a.end() - std::ptrdiff_t(one.size()), a.end())));
  }
}

INSTANTIATE_TEST_SUITE_P(Entries, BackendOps, ::testing::ValuesIn(backends()),
                         [](const ::testing::TestParamInfo<const Backend*>& i) { return std::string(i.param->name); });
INSTANTIATE_TEST_SUITE_P(Device, BackendOps, ::testing::Values(static_cast<const Backend*>(nullptr)),
                         [](const ::testing::TestParamInfo<const Backend*>&) { return std::string("cuda"); });

// ---- the scalar entry against independent formulas -------------------------

TEST(ScalarBackend, AttnResAgreesWithDouble) {
  Rng rng(21);
  const int T = 2, H = 16, n = 3;
  std::vector<std::vector<float>> src;
  std::vector<const float*> ptr;
  for (int j = 0; j < n; j++) src.push_back(randn(rng, size_t(T) * H));
  for (auto& s : src) ptr.push_back(s.data());
  auto u = randn(rng, H);
  std::vector<float> out(size_t(T) * H);
  scalar_backend().attn_res(ptr.data(), n, {u.data(), 0}, T, H, 1e-6f, out.data());
  for (int t = 0; t < T; t++) {
    double sc[3], m = -1e300, sum = 0;
    for (int j = 0; j < n; j++) {
      double ss = 0, dot = 0;
      for (int d = 0; d < H; d++) ss += double(src[j][size_t(t) * H + d]) * src[j][size_t(t) * H + d];
      const double r = 1.0 / std::sqrt(ss / H + 1e-6);
      for (int d = 0; d < H; d++) dot += src[j][size_t(t) * H + d] * r * u[d];
      sc[j] = dot, m = std::max(m, dot);
    }
    for (double& s : sc) sum += (s = std::exp(s - m));
    for (int d = 0; d < H; d++) {
      double want = 0;
      for (int j = 0; j < n; j++) want += sc[j] / sum * src[j][size_t(t) * H + d];
      EXPECT_NEAR(out[size_t(t) * H + d], want, 1e-5 * (1 + std::fabs(want)));
    }
  }
}

TEST(ScalarBackend, RouteBreaksTiesBySmallerIdAndRenormalizes) {
  // Scores σ(0) = 0.5 for every expert; bias lifts 5 and 2 equally, then 9.
  std::vector<float> logits(12, 0.0f), bias(12, 0.0f);
  bias[5] = bias[2] = 0.3f;
  bias[9] = 0.1f;
  int ids[3];
  float w[3];
  scalar_backend().route(logits.data(), {bias.data(), 0}, 1, 12, 3, 2.0f, ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 5);
  EXPECT_EQ(ids[2], 9);
  for (float x : w) EXPECT_FLOAT_EQ(x, 2.0f / 3.0f);  // unbiased 0.5 / 1.5 · scaling
}

TEST(ScalarBackend, CombineOrderIgnoresSlotOrder) {
  // The same (expert, weight, output) triples in another slot order give the same bits.
  Rng rng(22);
  const int K = 5, W = 23;
  std::vector<int> ids{7, 1, 30, 4, 12};
  auto wt = randn(rng, K), eo = randn(rng, size_t(K) * W, 100.0f);
  std::vector<float> a(W), b(W);
  scalar_backend().moe_combine(eo.data(), ids.data(), wt.data(), 1, K, W, a.data());
  std::vector<int> perm{3, 0, 4, 2, 1};
  std::vector<int> ids2(K);
  std::vector<float> wt2(K), eo2(eo.size());
  for (int s = 0; s < K; s++) {
    ids2[s] = ids[perm[s]], wt2[s] = wt[perm[s]];
    std::copy_n(eo.data() + size_t(perm[s]) * W, W, eo2.data() + size_t(s) * W);
  }
  scalar_backend().moe_combine(eo2.data(), ids2.data(), wt2.data(), 1, K, W, b.data());
  EXPECT_TRUE(bitwise_equal(a, b));
}

TEST(ScalarBackend, KdaChunkEqualsStepByStep) {
  Rng rng(23);
  KdaCase k = kda_case(rng);
  const int T = 4, C = 24, NH = 3;
  auto q = randn(rng, size_t(T) * C), kk = randn(rng, size_t(T) * C), v = randn(rng, size_t(T) * C);
  auto f = randn(rng, size_t(T) * C), beta = randn(rng, size_t(T) * NH), z = randn(rng, size_t(T) * C);
  std::vector<float> S(size_t(NH) * 64, 0.0f), conv(size_t(3) * 3 * C, 0.0f), out(size_t(T) * C);
  std::vector<float> S1 = S, conv1 = conv, out1(out.size());
  scalar_backend().kda_chunk(k.d, k.p(), S.data(), S.data(), conv.data(), T,
                             {q.data(), kk.data(), v.data(), f.data(), beta.data(), z.data()}, out.data(), nullptr);
  for (int t = 0; t < T; t++) {
    const size_t r = size_t(t) * C;
    scalar_backend().kda_chunk(k.d, k.p(), S1.data(), S1.data(), conv1.data(), 1,
                               {q.data() + r, kk.data() + r, v.data() + r, f.data() + r, beta.data() + t * NH, z.data() + r},
                               out1.data() + r, nullptr);
  }
  EXPECT_TRUE(bitwise_equal(S, S1) && bitwise_equal(conv, conv1) && bitwise_equal(out, out1));
  // Nothing non-finite and the state moved.
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  EXPECT_NE(std::count(S.begin(), S.end(), 0.0f), ptrdiff_t(S.size()));
}

TEST(ScalarBackend, MlaAttendOverOnePositionIsItsValue) {
  // With one cached position the softmax is 1: att = (U_h c′) ⊙ σ(gate).
  Rng rng(24);
  const MlaDims d{2, 4, 2, 3, 32};
  auto kv_b = random_bf16(rng, size_t(2) * 7 * 32);
  auto cache = randn(rng, 34), q = randn(rng, 2 * 6), gate = randn(rng, 2 * 3);
  std::vector<float> att(6);
  scalar_backend().mla_attend(d, {kv_b.data(), 14, 32, 0}, cache.data(), 0, 1, q.data(), gate.data(), att.data(),
                              nullptr);
  for (int h = 0; h < 2; h++)
    for (int r = 0; r < 3; r++) {
      double want = 0;
      for (int j = 0; j < 32; j++) want += double(bf16_to_f32(kv_b[(size_t(h) * 7 + 4 + r) * 32 + j])) * cache[j];
      want /= 1.0 + std::exp(-double(gate[size_t(h) * 3 + r]));
      EXPECT_NEAR(att[size_t(h) * 3 + r], want, 1e-5 * (1 + std::fabs(want)));
    }
}

TEST(BackendOwners, AreFreshAndNonZero) {
  const WeightOwner a = next_weight_owner(), b = next_weight_owner();
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(scalar_backend().name, std::string("scalar"));
  EXPECT_EQ(backends().front(), &scalar_backend());
}

}  // namespace
}  // namespace sluice
