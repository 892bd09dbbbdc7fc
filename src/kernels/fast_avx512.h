// kernels/fast_avx512.h — AVX-512 bodies of the bf16 and MXFP4 products (internal).
//
// fast_avx512.cpp is the only file compiled with -mavx512f/bw/dq/vl; fast.cpp
// calls these only when the CPU has them and the kernel choice is
// Isa::avx512. They give the same bits as the fast_avx2.h functions of the
// same name (same reduction order, two rows per register). Same contracts
// as fast.h. The int8 products have no AVX-512 body: Isa::avx512 runs the
// AVX2 ones.
#pragma once
#include <cstdint>

namespace sluice::fast::avx512 {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y);
void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y);
void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* x, float* y);
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* X, int n, float* Y);

}  // namespace sluice::fast::avx512
