// base/stats: the median of measurements.
#include "base/stats.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(Stats, MedianIsAMeasuredMiddleValue) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({3.0}), 3.0);
  EXPECT_EQ(median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 3.0);  // even count: the upper middle
}

}  // namespace
}  // namespace sluice
