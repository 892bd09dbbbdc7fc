// base/numeric.h — scalar number formats shared by the checkpoint and kernels:
// bfloat16 <-> float, E2M1 (MXFP4 element) and E8M0 (MX block scale).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace sluice {

// bf16 -> f32 is exact: the 16 stored bits are the high half of the f32.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f32 -> bf16 with round-to-nearest-even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// E2M1 code (low 4 bits) -> value. Bit 3 is the sign; bits 2..0 pick the magnitude.
inline constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// E8M0 biased exponent -> 2^(s-127), exact (s = 0 is the subnormal 2^-127).
// s = 255 (NaN in the OCP MX spec) is rejected when a checkpoint is opened.
inline float e8m0_to_f32(uint8_t s) { return std::ldexp(1.0f, int(s) - 127); }

}  // namespace sluice
