// Sampler: greedy at temperature 0, top-k/top-p truncation, empirical
// frequencies against the computed distribution (fixed seeds, so the checks are
// deterministic), seed determinism, and log-softmax.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "base/error.h"

namespace sluice {
namespace {

// Softmax of logits / t in double, for checking.
std::vector<double> softmax(const std::vector<float>& l, double t) {
  double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); i++) s += p[i] = std::exp((l[i] - m) / t);
  for (double& x : p) x /= s;
  return p;
}

TEST(Rng, SeedsAreReproducibleAndUniformIsInRange) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; i++) {
    uint64_t va = a.next();
    EXPECT_EQ(va, b.next());
    EXPECT_NE(va, c.next());
  }
  Rng u(7);
  double sum = 0;
  for (int i = 0; i < 100000; i++) {
    double v = u.uniform();
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    sum += v;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(Sampler, TemperatureZeroIsArgmax) {
  std::vector<float> l = {0.1f, 3.0f, -2.0f, 3.0f, 2.9f};
  Sampler s({0.0f, 1.0f, 0, 123});
  for (int i = 0; i < 20; i++) EXPECT_EQ(s.sample(l), 1);  // lowest id among the tied maxima
  Sampler k1({1.5f, 1.0f, 1, 9});                           // top_k = 1 is greedy too
  EXPECT_EQ(k1.sample(l), 1);
  auto d = sampling_distribution(l, {0.0f, 0.5f, 0, 0});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 1);
}

TEST(Sampler, TopKKeepsTheKLargest) {
  std::vector<float> l = {1.0f, 5.0f, 2.0f, 4.0f, 3.0f, -1.0f};
  auto d = sampling_distribution(l, {1.0f, 1.0f, 3, 0});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].id, 1);
  EXPECT_EQ(d[1].id, 3);
  EXPECT_EQ(d[2].id, 4);
  // Renormalised softmax over the kept three.
  double z = std::exp(5.0) + std::exp(4.0) + std::exp(3.0);
  EXPECT_NEAR(d[0].p, std::exp(5.0) / z, 1e-12);
  EXPECT_NEAR(d[2].p, std::exp(3.0) / z, 1e-12);
  Sampler s({1.0f, 1.0f, 3, 5});
  for (int i = 0; i < 2000; i++) {
    int t = s.sample(l);
    ASSERT_TRUE(t == 1 || t == 3 || t == 4) << t;
  }
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 (logits are their logs).
  std::vector<float> l = {std::log(0.0625f), std::log(0.25f), std::log(0.5f), std::log(0.0625f), std::log(0.125f)};
  auto ids = [&](float top_p) {
    std::vector<int> out;
    for (auto& c : sampling_distribution(l, {1.0f, top_p, 0, 0})) out.push_back(c.id);
    return out;
  };
  EXPECT_EQ(ids(0.5f), (std::vector<int>{2}));        // 0.5 reaches 0.5 exactly
  EXPECT_EQ(ids(0.51f), (std::vector<int>{2, 1}));    // needs the second
  EXPECT_EQ(ids(0.8f), (std::vector<int>{2, 1, 4}));  // 0.875 >= 0.8
  EXPECT_EQ(ids(0.01f), (std::vector<int>{2}));       // always at least one
  EXPECT_EQ(ids(1.0f).size(), 5u);
  auto d = sampling_distribution(l, {1.0f, 0.8f, 0, 0});
  EXPECT_NEAR(d[0].p, 0.5 / 0.875, 1e-6);
  EXPECT_NEAR(d[2].p, 0.125 / 0.875, 1e-6);
}

TEST(Sampler, TopPOnALargeVocabularyMatchesAFullSort) {
  // More candidates than the first sorted window (64), so the window must grow.
  std::vector<float> l(5000);
  Rng r(3);
  for (float& x : l) x = float(r.uniform() * 4.0);
  for (float top_p : {0.3f, 0.9f, 0.999f}) {
    auto d = sampling_distribution(l, {0.7f, top_p, 0, 0});
    auto p = softmax(l, 0.7);
    std::vector<int> order(l.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = int(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    double cum = 0;
    size_t keep = 0;
    while (keep < order.size()) {
      cum += p[order[keep++]];
      if (cum >= top_p) break;
    }
    // Equal up to a token at the boundary where float and double sums disagree.
    EXPECT_NEAR(double(d.size()), double(keep), 1.0) << top_p;
    for (size_t i = 0; i + 1 < std::min(d.size(), keep); i++) EXPECT_EQ(d[i].id, order[i]);
  }
}

TEST(Sampler, EmpiricalFrequenciesMatchTheDistribution) {
  std::vector<float> l = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    Sampler s({t, 1.0f, 0, 2024});
    const int n = 200000;
    std::vector<int> count(l.size());
    for (int i = 0; i < n; i++) count[size_t(s.sample(l))]++;
    auto p = softmax(l, t);
    for (size_t i = 0; i < l.size(); i++) {
      double sd = std::sqrt(p[i] * (1 - p[i]) / n);
      EXPECT_NEAR(double(count[i]) / n, p[i], 5 * sd + 1e-4) << "t=" << t << " id=" << i;
    }
  }
  // With truncation: the dropped tokens never appear, the kept ones at renormalised rates.
  Sampler s({1.0f, 0.9f, 4, 77});
  auto d = sampling_distribution(l, {1.0f, 0.9f, 4, 0});
  std::map<int, int> count;
  const int n = 100000;
  for (int i = 0; i < n; i++) count[s.sample(l)]++;
  EXPECT_EQ(count.size(), d.size());
  for (auto& c : d) EXPECT_NEAR(double(count[c.id]) / n, c.p, 0.01) << c.id;
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> l(512);
  Rng r(11);
  for (float& x : l) x = float(r.uniform() * 3.0);
  auto run = [&](uint64_t seed) {
    Sampler s({0.9f, 0.95f, 40, seed});
    std::vector<int> out;
    for (int i = 0; i < 64; i++) out.push_back(s.sample(l));
    return out;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST(Sampler, RejectsBadParametersAndLogits) {
  EXPECT_THROW(Sampler({-0.5f, 1.0f, 0, 0}), Error);
  EXPECT_THROW(Sampler({NAN, 1.0f, 0, 0}), Error);
  EXPECT_THROW(Sampler({1.0f, 0.0f, 0, 0}), Error);
  EXPECT_THROW(Sampler({1.0f, 1.5f, 0, 0}), Error);
  EXPECT_THROW(Sampler({1.0f, 1.0f, -1, 0}), Error);
  Sampler s({1.0f, 1.0f, 0, 0});
  std::vector<float> bad = {0.0f, NAN};
  EXPECT_THROW(s.sample(bad), Error);
  std::vector<float> none = {-INFINITY, -INFINITY};
  EXPECT_THROW(s.sample(none), Error);
  std::vector<float> one = {-INFINITY, 2.0f, -INFINITY};
  for (int i = 0; i < 10; i++) EXPECT_EQ(s.sample(one), 1);
}

TEST(LogSoftmax, NormalisedAndTopKOrdered) {
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f, -5.0f};
  std::vector<float> lp;
  log_softmax(l, lp);
  double s = 0;
  for (float x : lp) s += std::exp(double(x));
  EXPECT_NEAR(s, 1.0, 1e-6);
  auto p = softmax(l, 1.0);
  for (size_t i = 0; i < l.size(); i++) EXPECT_NEAR(lp[i], std::log(p[i]), 1e-5);
  auto top = top_logprobs(lp, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 2);
  EXPECT_EQ(top_logprobs(lp, 0).size(), 0u);
  EXPECT_EQ(top_logprobs(lp, 99).size(), l.size());
}

}  // namespace
}  // namespace sluice
