// The kernel-rate probe behind `sluice plan`'s compute floor: positive,
// finite rates, the rounds asked for, and the pool left as it was found.
#include "kernels/rate_probe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/threads.h"

namespace sluice::kernels {
namespace {

TEST(RateProbe, MeasuresEveryKernelAndRestoresThePool) {
  const int before = num_threads();
  const KernelRates one = measure_kernel_rates(1, 0.04);
  EXPECT_EQ(one.threads, 1);
  EXPECT_EQ(num_threads(), before);
  for (double r : {one.bf16_gbps, one.mxfp4_gbps, one.decode_gbps, one.int8_gbps}) {
    EXPECT_TRUE(std::isfinite(r));
    EXPECT_GT(r, 0.01);   // even a slow core moves tens of MB/s
    EXPECT_LT(r, 1000.0);  // and no core moves a TB/s: the timing is real
  }
  EXPECT_EQ(one.rounds, 8);  // the default
  EXPECT_GE(one.spread, 1.0);
  const KernelRates three = measure_kernel_rates(0, 0.04, 3);
  EXPECT_EQ(three.threads, before);
  EXPECT_EQ(three.rounds, 3);
  EXPECT_EQ(measure_kernel_rates(1, 0.04, 0).rounds, 1);  // at least one round
}

// One thread's copy rate (plan's staged uploads): finite, and more than a
// trickle on any machine that runs the tests (a memcpy of 8 MiB blocks).
TEST(RateProbe, CopyRateIsMeasured) {
  const double g = measure_copy_gbps(0.02);
  EXPECT_TRUE(std::isfinite(g));
  EXPECT_GT(g, 0.1);
}

}  // namespace
}  // namespace sluice::kernels
