#include "pack/int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/numeric.h"

namespace sluice {

namespace {

// One group: its scale and codes. lrintf rounds half to even (default mode).
float quantize_group(const uint16_t* w, int n, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; i++) amax = std::max(amax, std::fabs(bf16_to_f32(w[i])));
  const float scale = amax / 127.0f;
  if (scale == 0.0f) {
    std::memset(q, 0, size_t(n));
    return 0.0f;
  }
  const float inv = 1.0f / scale;
  for (int i = 0; i < n; i++) {
    const long v = std::lrintf(bf16_to_f32(w[i]) * inv);
    q[i] = int8_t(std::clamp<long>(v, -127, 127));
  }
  return scale;
}

}  // namespace

void quantize_int8_rows(const uint16_t* w, int rows, int cols, uint8_t* out) {
  const int groups = int8_groups(cols);
  for (int r = 0; r < rows; r++) {
    uint8_t* row = out + uint64_t(r) * int8_row_bytes(cols);
    int8_t* q = reinterpret_cast<int8_t*>(row + 4 * size_t(groups));
    const uint16_t* src = w + size_t(r) * size_t(cols);
    for (int g = 0; g < groups; g++) {
      const int c0 = g * kInt8Group, n = std::min(kInt8Group, cols - c0);
      const float s = quantize_group(src + c0, n, q + c0);
      std::memcpy(row + 4 * size_t(g), &s, 4);
    }
  }
}

void int8_roundtrip_row(const uint16_t* w, int cols, int group, float* out) {
  std::vector<int8_t> q(size_t(std::min(group, cols)));
  for (int c0 = 0; c0 < cols; c0 += group) {
    const int n = std::min(group, cols - c0);
    const float s = quantize_group(w + c0, n, q.data());
    for (int i = 0; i < n; i++) out[c0 + i] = float(q[size_t(i)]) * s;
  }
}

}  // namespace sluice
