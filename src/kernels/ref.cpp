#include "kernels/ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/numeric.h"

namespace sluice::ref {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y) {
  for (int r = 0; r < rows; r++) {
    const uint16_t* w = W + size_t(r) * cols;
    float acc = 0.0f;
    for (int c = 0; c < cols; c++) acc += bf16_to_f32(w[c]) * x[c];
    y[r] = acc;
  }
}

void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y) {
  for (int t = 0; t < n; t++) matvec_bf16(W, rows, cols, X + size_t(t) * cols, Y + size_t(t) * rows);
}

void dequant_mxfp4_row(const uint8_t* packed, const uint8_t* scale, int cols, int r, float* out) {
  const uint8_t* p = packed + size_t(r) * (cols / 2);
  const uint8_t* s = scale + size_t(r) * (cols / 32);
  for (int c = 0; c < cols; c++) {
    uint8_t byte = p[c / 2];
    uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0x0f);
    out[c] = kE2M1[code] * e8m0_to_f32(s[c / 32]);
  }
}

void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* x,
                  float* y) {
  for (int r = 0; r < rows; r++) {
    const uint8_t* p = packed + size_t(r) * (cols / 2);
    const uint8_t* s = scale + size_t(r) * (cols / 32);
    float acc = 0.0f;
    for (int c = 0; c < cols; c++) {
      uint8_t byte = p[c / 2];
      uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0x0f);
      acc += kE2M1[code] * e8m0_to_f32(s[c / 32]) * x[c];
    }
    y[r] = acc;
  }
}

void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* X,
                  int n, float* Y) {
  for (int t = 0; t < n; t++)
    matvec_mxfp4(packed, scale, rows, cols, X + size_t(t) * cols, Y + size_t(t) * rows);
}

namespace {
float int8_scale(const uint8_t* row, int g) {
  float s;
  std::memcpy(&s, row + 4 * size_t(g), 4);
  return s;
}
}  // namespace

void quantize_int16_groups(const float* x, int cols, int16_t* xq, float* xscale) {
  for (int g = 0; g < int8_groups(cols); g++) {
    const int c0 = g * kInt8Group, c1 = std::min(cols, c0 + kInt8Group);
    float m = 0.0f;
    bool finite = true;
    for (int c = c0; c < c1; c++) {
      const float a = std::fabs(x[c]);
      finite = finite && a <= std::numeric_limits<float>::max();
      m = std::max(m, a);
    }
    if (!finite || m < kInt16Tiny) {
      std::fill(xq + c0, xq + c1, int16_t(0));
      xscale[g] = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    xscale[g] = m / kInt16Max;
    const float inv = kInt16Max / m;
    for (int c = c0; c < c1; c++) xq[c] = int16_t(std::nearbyint(x[c] * inv));
  }
}

void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y) {
  const int groups = int8_groups(cols);
  std::vector<int16_t> xq(static_cast<size_t>(cols));
  std::vector<float> xs(static_cast<size_t>(groups));
  quantize_int16_groups(x, cols, xq.data(), xs.data());
  for (int r = 0; r < rows; r++) {
    const uint8_t* row = W + uint64_t(r) * int8_row_bytes(cols);
    const int8_t* q = reinterpret_cast<const int8_t*>(row + 4 * size_t(groups));
    float acc = 0.0f;
    for (int g = 0; g < groups; g++) {
      const int c0 = g * kInt8Group, c1 = std::min(cols, c0 + kInt8Group);
      int32_t part = 0;  // |q·xq| <= 128 · 32767: 128 of them fit in 32 bits
      for (int c = c0; c < c1; c++) part += int32_t(q[c]) * int32_t(xq[size_t(c)]);
      acc += float(part) * (int8_scale(row, g) * xs[size_t(g)]);
    }
    y[r] = acc;
  }
}

void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y) {
  for (int t = 0; t < n; t++) matvec_int8(W, rows, cols, X + size_t(t) * cols, Y + size_t(t) * rows);
}

void dequant_int8_row(const uint8_t* W, int cols, int r, float* out) {
  const uint8_t* row = W + uint64_t(r) * int8_row_bytes(cols);
  const int8_t* q = reinterpret_cast<const int8_t*>(row + 4 * size_t(int8_groups(cols)));
  for (int c = 0; c < cols; c++) out[c] = float(q[c]) * int8_scale(row, c / kInt8Group);
}

float rms_inv(const float* x, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  return 1.0f / std::sqrt(ss / float(n) + eps);
}

void rmsnorm(const float* x, const float* w, int n, float eps, float* y) {
  float r = rms_inv(x, n, eps);
  for (int i = 0; i < n; i++) y[i] = w[i] * (x[i] * r);
}

void l2norm(float* x, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  float scale = 1.0f / std::max(std::sqrt(ss), eps);
  for (int i = 0; i < n; i++) x[i] *= scale;
}

void softmax(float* x, int n) {
  float m = x[0];
  for (int i = 1; i < n; i++) m = std::max(m, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; i++) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  for (int i = 0; i < n; i++) x[i] /= sum;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x * sigmoid(x); }

float situ(float g, float u, float beta, float beta_lin) {
  float a = (beta * std::tanh(g / beta)) * sigmoid(g);
  float b = beta_lin * std::tanh(u / beta_lin);
  return a * b;
}

void situ_glu(const float* g, const float* u, int n, float beta, float beta_lin, float* out) {
  for (int i = 0; i < n; i++) out[i] = situ(g[i], u[i], beta, beta_lin);
}

void causal_conv_silu_step(const float* w, int C, int K, float* hist, const float* x, float* y) {
  causal_conv_silu_step(w, C, K, hist, x, y, 0, C);
}

void causal_conv_silu_step(const float* w, int C, int K, float* hist, const float* x, float* y, int c0, int c1) {
  for (int c = c0; c < c1; c++) {
    float acc = 0.0f;
    for (int j = 0; j < K - 1; j++) acc += w[size_t(c) * K + j] * hist[size_t(j) * C + c];
    acc += w[size_t(c) * K + K - 1] * x[c];
    y[c] = silu(acc);
  }
  // Each history row moves up one (rows are C apart: no overlap within a range).
  const size_t n = sizeof(float) * size_t(c1 - c0);
  for (int j = 0; j + 1 < K - 1; j++) std::memcpy(hist + size_t(j) * C + c0, hist + size_t(j + 1) * C + c0, n);
  if (K > 1) std::memcpy(hist + size_t(K - 2) * C + c0, x + c0, n);
}

}  // namespace sluice::ref
