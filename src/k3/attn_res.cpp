// AttnRes (spec §3.2): a softmax "attention over depth" with one learned
// pseudo-query u per mix site. All FP32; the sources are mixed raw.
#include <cmath>
#include <vector>

#include "k3/layers.h"
#include "kernels/ref.h"

namespace sluice {

void attn_res(std::span<const float* const> sources, const float* u, int T, int H, float eps, float* out) {
  const size_t n = sources.size();
  std::vector<float> score(n);
  for (int t = 0; t < T; t++) {
    const size_t row = size_t(t) * H;
    for (size_t j = 0; j < n; j++) {
      const float* v = sources[j] + row;
      const float r = ref::rms_inv(v, H, eps);
      float s = 0.0f;
      for (int d = 0; d < H; d++) s += (v[d] * r) * u[d];
      score[j] = s;
    }
    ref::softmax(score.data(), int(n));
    float* o = out + row;
    for (int d = 0; d < H; d++) o[d] = 0.0f;
    for (size_t j = 0; j < n; j++) {
      const float* v = sources[j] + row;
      const float p = score[j];
      for (int d = 0; d < H; d++) o[d] += p * v[d];
    }
  }
}

}  // namespace sluice
