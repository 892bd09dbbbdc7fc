// K3.1 Pro's indexer scores (scalar definition) and its top-k selection
// (docs/k31-spec.md §3.1 step 7, §3.2).
#include "kernels/dsa.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace sluice::dsa {

void scores_scalar(const float* qi, const float* w, const float* keys, int heads, int dim, int64_t n, float* score) {
  for (int64_t s = 0; s < n; s++) {
    const float* k = keys + size_t(s) * size_t(dim);
    float acc = 0.0f;
    for (int h = 0; h < heads; h++) {
      const float* q = qi + size_t(h) * size_t(dim);
      float d = 0.0f;
      for (int j = 0; j < dim; j++) d += q[j] * k[j];
      const float r = d > 0.0f ? d : 0.0f;
      acc += w[h] * r;
    }
    score[s] = acc;
  }
}

int select_topk(const float* score, int64_t n, int k, int* order, int* sel) {
  if (n <= int64_t(k)) {
    std::iota(sel, sel + n, 0);  // every causal position: the dense set (§3.2)
    return int(n);
  }
  // NaN ranks below every number: it sorts as −inf (then by position).
  auto key = [&](int i) {
    const float v = score[i];
    return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
  };
  auto before = [&](int a, int b) {
    const float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  };
  std::iota(order, order + n, 0);
  std::nth_element(order, order + k, order + n, before);
  std::copy(order, order + k, sel);
  std::sort(sel, sel + k);
  return k;
}

}  // namespace sluice::dsa
