// base/clock.h — the steady clock as plain numbers, for timing and for
// timestamps that two parts of the engine compare (the expert source's fetch
// times against bench's step times).
#pragma once
#include <chrono>
#include <cstdint>

namespace sluice {

inline uint64_t steady_ns() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

inline double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace sluice
