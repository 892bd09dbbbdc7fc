// kernels/fast_avx2.h — the AVX2/FMA bodies of the fast.h kernels (internal).
//
// fast_avx2.cpp is the only file compiled with -mavx2 -mfma; fast.cpp calls
// these only after checking the CPU, so the rest of the library stays baseline
// x86-64. Same contracts as fast.h.
#pragma once
#include <cstdint>

namespace sluice::fast::avx2 {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y);
void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y);
void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* x, float* y);
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* X, int n, float* Y);

void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y);
// ref::quantize_int16_groups, bit for bit; xq has room for round_up(cols, 128) values.
void quantize_int16_groups(const float* x, int cols, int16_t* xq, float* xscale);
void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y);

}  // namespace sluice::fast::avx2

// The x86 SIMD products as one family of bits (the avx2 backend entry's): the
// AVX-512 bodies when fast::isa() is avx512, else the AVX2 ones; never ref::.
// Call only on a CPU with AVX2/FMA.
namespace sluice::fast::x86 {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y);
void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y);
void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* x, float* y);
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* X, int n, float* Y);

}  // namespace sluice::fast::x86
