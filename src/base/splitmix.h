// base/splitmix.h — splitmix64, the small seeded generator sluice uses wherever
// it needs reproducible pseudo-random numbers (sampling seeds, probe offsets,
// synthetic traces). Its output is fixed by the algorithm, unlike std::
// distributions, so the same seed gives the same numbers on every platform.
#pragma once
#include <cstdint>

namespace sluice {

inline constexpr uint64_t kSplitmixGamma = 0x9E3779B97F4A7C15ull;

// Advances `state` and returns the next 64-bit output.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += kSplitmixGamma);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace sluice
