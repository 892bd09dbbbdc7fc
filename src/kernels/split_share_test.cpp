// The split's share from timed products (kernels/split_share.h): made-up
// timings with a known fixed cost and rate on each side.
#include "kernels/split_share.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

// Calls over matrices of `sizes` bytes timed at `share`: each side a fixed
// cost plus its bytes at its rate (bytes a second).
std::vector<SplitTiming> timed(const std::vector<double>& sizes, double share, double gpu_fixed, double gpu_rate,
                               double cpu_fixed, double cpu_rate) {
  std::vector<SplitTiming> v;
  for (double b : sizes) v.push_back({b, gpu_fixed + share * b / gpu_rate, cpu_fixed + (1 - share) * b / cpu_rate});
  return v;
}

// The share that has both sides finish together, by brute force.
double balance(const std::vector<double>& sizes, double gf, double gr, double cf, double cr) {
  double best = 0, gap = 1e30;
  for (int i = 1; i < 100000; i++) {
    const double s = i / 100000.0;
    double g = 0, c = 0;
    for (double b : sizes) g += gf + s * b / gr, c += cf + (1 - s) * b / cr;
    if (std::abs(g - c) < gap) gap = std::abs(g - c), best = s;
  }
  return best;
}

const std::vector<double> kSizes = {2.35e9, 1.0e8, 3.0e8, 4.8e8, 1.0e8, 2.6e8, 8.8e7};  // a head and projections

TEST(SplitShare, NoFixedCostsIsTheRatioOfTheRates) {
  const auto calls = timed(kSizes, 0.25, 0, 45e9, 0, 95e9);
  EXPECT_NEAR(balanced_split_share(calls, 0.25), 45.0 / 140, 1e-6);
}

TEST(SplitShare, TheGpusFixedCostTakesRowsFromIt) {
  const double gf = 150e-6, cf = 10e-6;
  const auto calls = timed(kSizes, 0.25, gf, 45e9, cf, 95e9);
  const double s = balanced_split_share(calls, 0.25);
  EXPECT_NEAR(s, balance(kSizes, gf, 45e9, cf, 95e9), 1e-4);
  // The ratio of the measured rates (the fixed cost counted as bytes' time)
  // gives the GPU too few rows: the line does better.
  const double g = 0.25 * 3.678e9 / (7 * gf + 0.25 * 3.678e9 / 45e9), c = 0.75 * 3.678e9 / (7 * cf + 0.75 * 3.678e9 / 95e9);
  EXPECT_LT(g / (g + c), s);
  // The same whatever share the calls were timed at.
  EXPECT_NEAR(balanced_split_share(timed(kSizes, 0.4, gf, 45e9, cf, 95e9), 0.4), s, 1e-9);
}

TEST(SplitShare, OneSizeFallsBackToTheRatio) {
  const auto calls = timed({1e8, 1e8, 1e8}, 0.25, 100e-6, 45e9, 0, 95e9);
  const double g = 0.25e8 / (100e-6 + 0.25e8 / 45e9), c = 0.75e8 / (0.75e8 / 95e9);
  EXPECT_NEAR(balanced_split_share(calls, 0.25), g / (g + c), 1e-9);
}

TEST(SplitShare, BoundedAndZeroWithoutTimings) {
  EXPECT_EQ(balanced_split_share({}, 0.25), 0.0);
  EXPECT_NEAR(balanced_split_share(timed(kSizes, 0.25, 0, 1e12, 0, 1e6), 0.25), 0.75, 1e-12);  // a bus far faster
  EXPECT_NEAR(balanced_split_share(timed(kSizes, 0.25, 0, 1e6, 0, 1e12), 0.25), 1.0 / 32, 1e-12);
  // A negative intercept (noise) is read as none: the line through the origin.
  auto calls = timed(kSizes, 0.25, 0, 45e9, 0, 95e9);
  for (SplitTiming& t : calls) t.gpu_s -= 5e-6 * (t.bytes < 2e9);
  const double s = balanced_split_share(calls, 0.25);
  EXPECT_GT(s, 0.25);
  EXPECT_LT(s, 0.4);
}

}  // namespace
}  // namespace sluice
