// dsa::scores_avx2 (kernels/dsa.h): eight key positions per register, each
// lane the scalar loop's multiply then add (no FMA: the same bits).
#include "kernels/dsa.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <vector>

namespace sluice::dsa {

void scores_avx2(const float* qi, const float* w, const float* keys, int heads, int dim, int64_t n, float* score) {
  thread_local std::vector<float> kt;  // a block of 8 keys, transposed: [dim][8]
  kt.resize(size_t(dim) * 8);
  const __m256 zero = _mm256_setzero_ps();
  int64_t s = 0;
  for (; s + 8 <= n; s += 8) {
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < dim; j++) kt[size_t(j) * 8 + size_t(i)] = keys[size_t(s + i) * size_t(dim) + size_t(j)];
    __m256 acc = zero;
    for (int h = 0; h < heads; h++) {
      const float* q = qi + size_t(h) * size_t(dim);
      __m256 d = zero;
      for (int j = 0; j < dim; j++) d = _mm256_add_ps(d, _mm256_mul_ps(_mm256_set1_ps(q[j]), _mm256_loadu_ps(&kt[size_t(j) * 8])));
      const __m256 r = _mm256_max_ps(d, zero);  // NaN or −0 → +0, as `d > 0 ? d : 0`
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w[h]), r));
    }
    _mm256_storeu_ps(score + s, acc);
  }
  scores_scalar(qi, w, keys + size_t(s) * size_t(dim), heads, dim, n - s, score + s);
}

}  // namespace sluice::dsa
#endif
