// kernels/products.h — the matrix products, declared once.
//
// Every implementation of the products (ref::, fast::avx2::, fast::avx512::,
// and fast:: for the entry chosen at startup) has these signatures; each
// header expands the list inside its own namespace instead of repeating it.
// Weights are stored [rows = out][cols = in] row-major, as torch nn.Linear;
// y = W x, and X is [n][cols], Y is [n][rows] (Y[t][r] = Σ_c W[r,c] X[t][c]).
//   bf16:  W one bf16 per element.
//   MXFP4: packed [rows][cols/2] (element 2i in the low nibble), scale
//          [rows][cols/32] E8M0. cols % 32 == 0.
//   int8:  rows of ref::int8_row_bytes(cols) bytes with per-group FP32
//          scales (kernels/ref.h, the int8 spine).
#pragma once
#include <cstdint>

// The bf16 and MXFP4 products (every SIMD body has them).
#define SLUICE_FLOAT_PRODUCTS                                                                          \
  void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y);                  \
  void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y);           \
  void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* x,  \
                    float* y);                                                                         \
  void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* X,  \
                    int n, float* Y);

// The int8 products (AVX-512 has no body of its own: its entry runs the AVX2 ones).
#define SLUICE_INT8_PRODUCTS                                                          \
  void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y);  \
  void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y);

// All of them.
#define SLUICE_MATRIX_PRODUCTS SLUICE_FLOAT_PRODUCTS SLUICE_INT8_PRODUCTS
