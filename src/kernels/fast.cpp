// Placeholder dispatch to the reference kernels until the AVX2 versions land.
#include "kernels/fast.h"

#include "kernels/ref.h"

namespace sluice::fast {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y) {
  ref::matvec_bf16(W, rows, cols, x, y);
}
void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y) {
  ref::matmul_bf16(W, rows, cols, X, n, Y);
}
void matvec_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* x, float* y) {
  ref::matvec_mxfp4(p, s, rows, cols, x, y);
}
void matmul_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* X, int n,
                  float* Y) {
  ref::matmul_mxfp4(p, s, rows, cols, X, n, Y);
}

}  // namespace sluice::fast
