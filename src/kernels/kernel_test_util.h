// kernels/kernel_test_util.h — the random inputs every kernel test draws
// (kernels_test, backend_test, cuda/cuda_test), and how they compare results.
// Header-only: the CUDA test binary links no more than the kernels.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/numeric.h"
#include "kernels/ref.h"

namespace sluice::kernel_test {

using Rng = std::mt19937_64;

// Activations: mostly N(0,1), some exact zeros of both signs, some larger or
// tiny magnitudes.
inline std::vector<float> random_activations(Rng& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 19);
  std::vector<float> x(n);
  for (float& v : x) {
    switch (kind(rng)) {
      case 0: v = 0.0f; break;
      case 1: v = -0.0f; break;
      case 2: v = normal(rng) * 1e3f; break;
      case 3: v = normal(rng) * 1e-3f; break;
      default: v = normal(rng); break;
    }
    v *= scale;
  }
  return x;
}

// bf16 weights: rounded normals of varied magnitude, with ±0 and a few bf16
// bit patterns drawn uniformly from the finite ones.
inline std::vector<uint16_t> random_bf16(Rng& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 19);
  std::uniform_int_distribution<int> exp_shift(-20, 20);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  std::vector<uint16_t> w(n);
  for (uint16_t& v : w) {
    switch (kind(rng)) {
      case 0: v = 0x0000; break;
      case 1: v = 0x8000; break;
      case 2:  // any finite bf16 in a range that cannot overflow a sum
        do v = uint16_t(bits(rng)); while (std::fabs(bf16_to_f32(v)) > 1e20f || std::isnan(bf16_to_f32(v)));
        break;
      default: v = f32_to_bf16(std::ldexp(normal(rng), exp_shift(rng) / 4)); break;
    }
  }
  return w;
}

struct Mxfp4 {
  std::vector<uint8_t> packed, scale;
};

// Every nibble code with equal chance; E8M0 scales drawn from [scale_lo, scale_hi].
inline Mxfp4 random_mxfp4(Rng& rng, int rows, int cols, int scale_lo, int scale_hi) {
  std::uniform_int_distribution<int> byte(0, 255), s(scale_lo, scale_hi);
  Mxfp4 m;
  m.packed.resize(size_t(rows) * cols / 2);
  m.scale.resize(size_t(rows) * cols / 32);
  for (auto& b : m.packed) b = uint8_t(byte(rng));
  for (auto& b : m.scale) b = uint8_t(s(rng));
  return m;
}

// int8 rows (kernels/ref.h): every code, scales of varied magnitude with some zeros.
inline std::vector<uint8_t> random_int8(Rng& rng, int rows, int cols) {
  std::uniform_int_distribution<int> byte(0, 255), kind(0, 9), shift(-30, 10);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> W(size_t(rows) * ref::int8_row_bytes(cols));
  for (auto& b : W) b = uint8_t(byte(rng));
  for (int r = 0; r < rows; r++)
    for (int g = 0; g < ref::int8_groups(cols); g++) {
      const float s = kind(rng) == 0 ? 0.0f : std::ldexp(normal(rng), shift(rng) / 4);
      std::memcpy(W.data() + size_t(r) * ref::int8_row_bytes(cols) + 4 * size_t(g), &s, 4);
    }
  return W;
}

// Tolerance for one dot product: 1e-5 of Σ|w·x|, plus a few subnormal steps
// per term (products that underflow round in absolute, not relative, terms).
inline double tolerance(double abs_sum, int cols) {
  return 1e-5 * abs_sum + 4.0 * cols * std::numeric_limits<float>::denorm_min();
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace sluice::kernel_test
