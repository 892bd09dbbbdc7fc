// dsa::scores_avx512 (kernels/dsa.h): sixteen key positions per register, each
// lane the scalar loop's multiply then add (no FMA: the same bits).
#include "kernels/dsa.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <vector>

// GCC 12's own intrinsics header trips these (_mm512_undefined_ps), as in fast_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace sluice::dsa {

void scores_avx512(const float* qi, const float* w, const float* keys, int heads, int dim, int64_t n, float* score) {
  thread_local std::vector<float> kt;  // a block of 16 keys, transposed: [dim][16]
  kt.resize(size_t(dim) * 16);
  const __m512 zero = _mm512_setzero_ps();
  int64_t s = 0;
  for (; s + 16 <= n; s += 16) {
    for (int i = 0; i < 16; i++)
      for (int j = 0; j < dim; j++) kt[size_t(j) * 16 + size_t(i)] = keys[size_t(s + i) * size_t(dim) + size_t(j)];
    __m512 acc = zero;
    for (int h = 0; h < heads; h++) {
      const float* q = qi + size_t(h) * size_t(dim);
      __m512 d = zero;
      for (int j = 0; j < dim; j++) d = _mm512_add_ps(d, _mm512_mul_ps(_mm512_set1_ps(q[j]), _mm512_loadu_ps(&kt[size_t(j) * 16])));
      const __m512 r = _mm512_max_ps(d, zero);  // NaN or −0 → +0, as `d > 0 ? d : 0`
      acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(w[h]), r));
    }
    _mm512_storeu_ps(score + s, acc);
  }
  scores_scalar(qi, w, keys + size_t(s) * size_t(dim), heads, dim, n - s, score + s);
}

}  // namespace sluice::dsa
#endif
