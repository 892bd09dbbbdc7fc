#include "base/numeric.h"

#include <gtest/gtest.h>

namespace sluice {

TEST(Numeric, Bf16RoundTripIsExact) {
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    float f = bf16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_bf16(f), uint16_t(h));
  }
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3·2^-8 ties between 1+2^-7 (odd) and 1+2^-6 (even).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
}

TEST(Numeric, E2M1AndE8M0) {
  EXPECT_EQ(kE2M1[7], 6.0f);
  EXPECT_EQ(kE2M1[9], -0.5f);
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(120), std::ldexp(1.0f, -7));
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.0f, -127));
}

}  // namespace sluice
