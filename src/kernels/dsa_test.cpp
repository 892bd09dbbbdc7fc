// K3.1 Pro's indexer kernels (kernels/dsa.h): the SIMD score bodies against
// the scalar loop, and the selection's rules (ties keep the earlier position,
// NaN ranks last, at most top-k positions are all of them) against a direct
// statement of them. The backend ops are in backend_test.cpp, for every entry.
#include "kernels/dsa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/fast.h"
#include "kernels/kernel_test_util.h"

namespace sluice {
namespace {

using namespace kernel_test;

// The AVX2 and AVX-512 score bodies give the scalar loop's bits (where the CPU has them).
TEST(DsaScores, SimdBodiesAreBitwiseScalar) {
  Rng rng(9);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 100}) {
    const int heads = 5, dim = 24;
    auto keys = random_activations(rng, size_t(n) * dim), qi = random_activations(rng, size_t(heads) * dim),
         w = random_activations(rng, size_t(heads));
    for (int64_t s = 3; s < n; s += 5) std::copy(keys.begin(), keys.begin() + dim, keys.begin() + s * dim);  // ties
    keys[0] = std::numeric_limits<float>::quiet_NaN();  // a NaN product counts as 0 in every body
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    dsa::scores_scalar(qi.data(), w.data(), keys.data(), heads, dim, n, want.data());
    if (fast::best_isa() >= fast::Isa::avx2) {
      dsa::scores_avx2(qi.data(), w.data(), keys.data(), heads, dim, n, got.data());
      ASSERT_TRUE(bitwise_equal(want, got)) << "avx2 n=" << n;
    }
    if (fast::best_isa() >= fast::Isa::avx512) {
      dsa::scores_avx512(qi.data(), w.data(), keys.data(), heads, dim, n, got.data());
      ASSERT_TRUE(bitwise_equal(want, got)) << "avx512 n=" << n;
    }
  }
}

// docs/k31-spec.md §3.2: by score descending, then the earlier position; NaN last; ±0 equal.
TEST(DsaSelect, TiesKeepTheEarlierPositionAndNanRanksLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> score = {0.0f, nan, 2.0f, -0.0f, 2.0f, 0.0f, -1.0f, 5.0f};
  std::vector<int> order(score.size()), sel(8);
  ASSERT_EQ(dsa::select_topk(score.data(), 8, 4, order.data(), sel.data()), 4);
  EXPECT_EQ(std::vector<int>(sel.begin(), sel.begin() + 4), (std::vector<int>{0, 2, 4, 7}));
  ASSERT_EQ(dsa::select_topk(score.data(), 8, 6, order.data(), sel.data()), 6);
  EXPECT_EQ(std::vector<int>(sel.begin(), sel.begin() + 6), (std::vector<int>{0, 2, 3, 4, 5, 7}));
  ASSERT_EQ(dsa::select_topk(score.data(), 8, 7, order.data(), sel.data()), 7);
  EXPECT_EQ(std::vector<int>(sel.begin(), sel.begin() + 7), (std::vector<int>{0, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(dsa::select_topk(score.data(), 8, 8, order.data(), sel.data()), 8);  // all: the dense set
  EXPECT_EQ(sel, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

}  // namespace
}  // namespace sluice
