// kernels/ref.h — plain scalar reference implementation of every numeric op.
//
// These are the definitions: simple loops, FP32 accumulation in a fixed order,
// no SIMD, no threads. Fast kernels (kernels/backend.h entries) must agree with them on
// random inputs (kernels/kernels_test.cpp). Weight matrices are stored
// [rows = out][cols = in] row-major, as torch nn.Linear; y = W x.
#pragma once
#include <cstdint>

#include "kernels/products.h"

namespace sluice::ref {

// The matrix products (kernels/products.h): each output sums c = 0..cols-1
// left to right in FP32; the int8 one as described below.
SLUICE_MATRIX_PRODUCTS

// Dequantizes row r of an MXFP4 matrix into `out` (cols floats). Exact.
void dequant_mxfp4_row(const uint8_t* packed, const uint8_t* scale, int cols, int r, float* out);

// int8 with per-group fp32 scales (the int8 spine, pack/int8.h): W is rows
// of int8_row_bytes(cols) bytes, each fp32 scale[int8_groups(cols)] then
// int8 q[cols]; W[r,c] = q[c] · scale[c / kInt8Group]. Rows and scales need
// no alignment.
//
// The product quantizes its activations too, per call: x in groups of
// kInt8Group columns (the weights' groups) as int16 with one fp32 scale each
// (quantize_int16_groups). A row's sum is then, per group in order,
// float(Σ_c q·xq, exact in integers) · (scale · xscale), added in FP32 to the
// row's total. Integer products need no conversion of the weights to float,
// and int16 loses at most half a step of 1/32767 of a group's largest |x|:
// ~1e-5, against the weights' own ~0.6 % (docs/kernels.md).
constexpr int kInt8Group = 128;
inline int int8_groups(int cols) { return (cols + kInt8Group - 1) / kInt8Group; }
inline uint64_t int8_row_bytes(int cols) { return uint64_t(cols) + 4 * uint64_t(int8_groups(cols)); }
// Per group g of x (the last may be shorter): m = max|x|; xscale[g] = m / 32767
// and xq = round-half-even(x · (32767 / m)), in [-32767, 32767]. A group with
// m < 2^-96 is all zeros (xq = 0, xscale 0); one holding an inf or NaN gets
// xq = 0 and xscale NaN, so the rows it meets come out NaN as an FP32 product would.
constexpr float kInt16Max = 32767.0f;
constexpr float kInt16Tiny = 0x1p-96f;
void quantize_int16_groups(const float* x, int cols, int16_t* xq, float* xscale);
// Row r of an int8 matrix as floats (exact).
void dequant_int8_row(const uint8_t* W, int cols, int r, float* out);

// y = w ⊙ x / sqrt(mean(x²) + eps). y may alias x.
void rmsnorm(const float* x, const float* w, int n, float eps, float* y);
// 1 / sqrt(mean(x²) + eps)
float rms_inv(const float* x, int n, float eps);
// x ← x / max(||x||₂, eps)   (ggml_l2_norm, what the fixture oracle uses)
void l2norm(float* x, int n, float eps);
// x ← softmax(x), max subtracted, FP32.
void softmax(float* x, int n);

float sigmoid(float x);
float silu(float x);
// SiTU-GLU: [β·tanh(g/β)·σ(g)] · [β_lin·tanh(u/β_lin)]
float situ(float g, float u, float beta, float beta_lin);
// out[i] = situ(g[i], u[i]) for i < n. out may alias g or u.
void situ_glu(const float* g, const float* u, int n, float beta, float beta_lin, float* out);

// Depthwise causal conv, one step: for each channel c,
//   y[c] = silu( sum_{j<K-1} w[c*K+j]·hist[j*C+c] + w[c*K+K-1]·x[c] )
// where hist holds the previous K-1 inputs, oldest first ([K-1][C]); then the
// history shifts and x becomes its newest row. The range form does channels
// c0..c1-1 only (channels are independent: a threaded caller splits them).
void causal_conv_silu_step(const float* w, int C, int K, float* hist, const float* x, float* y);
void causal_conv_silu_step(const float* w, int C, int K, float* hist, const float* x, float* y, int c0, int c1);

}  // namespace sluice::ref
