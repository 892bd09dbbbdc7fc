// AVX2/FMA matrix-vector and matrix-matrix products (see fast_avx2.h).
//
// Per-row reduction order — the one thing every path here must keep, so that
// matmul gives bitwise the same result per token as matvec, and no result
// depends on the thread count or on how rows and tokens are tiled:
//
//   bf16:  x is permuted once per call into blocks of 16 columns, the 8 even
//          columns then the 8 odd ones (zero-padded to a multiple of 16), so a
//          row is decoded with one shift (even) and one mask (odd). For block b
//          in order, acc_even += w_even·x_even and acc_odd += w_odd·x_odd (FMA,
//          8 lanes each). The last partial block is padded with zeros.
//   MXFP4: x is permuted into blocks of 32 (one scale group) in the order the
//          decoder emits the 4 vectors A,B,C,D of a group (mx_column below).
//          For group g in order: acc_k += (value·2^(s-127))·x (FMA) with
//          acc_0 taking A then C and acc_1 taking B then D.
//   Then y = hsum(acc_0 + acc_1), hsum adding the two 128-bit halves, then
//   the high pair onto the low pair, then lane 1 onto lane 0.
//
// A tile computes R rows × T tokens at once; each (row, token) pair has its
// own accumulators and sees exactly the sequence above, so tiling changes
// speed, never bits. Rows are split over threads in groups; within a thread,
// rows are blocked so a block of weights stays in L2 while every token passes
// over it (weights are read from memory once per call), and tokens are blocked
// so their activations stay in L2 too.
#if defined(__x86_64__)

#include "kernels/fast_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <memory>
#include <new>

#include "base/numeric.h"
#include "kernels/threads.h"

namespace sluice::fast::avx2 {
namespace {

// Tiling. Changing these changes speed only (kernels_test checks that).
constexpr int kMatvecRows = 4;      // rows per matvec tile (memory streams in flight)
constexpr int kMatmulRows = 2;      // rows × tokens per matmul tile: 2·R·T accumulators
constexpr int kMatmulTokens = 2;    //   must fit the 16 ymm registers with the weights
constexpr int kMxMatvecRows = 2;
constexpr int kMxMatmulRows = 1;
constexpr int kMxMatmulTokens = 3;
constexpr size_t kL2WeightBytes = 256 << 10;  // weight rows kept hot per row block
constexpr size_t kL2ActBytes = 256 << 10;     // activations kept hot per token block
// Below this many multiply-adds a call runs on the calling thread alone: waking
// the pool costs more than it saves.
constexpr size_t kParallelMinMacs = size_t(1) << 17;

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

// 32-byte aligned float scratch owned by the calling thread (activations
// permuted for the kernels); grows, never shrinks.
float* scratch(size_t n) {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float, Free> buf;
  thread_local size_t cap = 0;
  if (n > cap) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    buf.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!buf) throw std::bad_alloc();
    cap = n;
  }
  return buf.get();
}

// The fixed final reduction of one (row, token) pair.
inline float hsum(__m256 a0, __m256 a1) {
  __m256 v = _mm256_add_ps(a0, a1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---------------------------------------------------------------- bf16

struct Bf16Mat {
  const uint16_t* W;
  int rows, cols;
  size_t row_bytes() const { return size_t(cols) * 2; }
};

void permute_bf16(const float* x, int cols, float* xp) {
  int padded = round_up(cols, 16);
  for (int c = 0; c < padded; c++) xp[c / 16 * 16 + (c & 1) * 8 + (c % 16) / 2] = c < cols ? x[c] : 0.0f;
}

struct Bf16Kernel {
  using Mat = Bf16Mat;
  static int padded_cols(int cols) { return round_up(cols, 16); }
  static void permute(const float* x, int cols, float* xp) { permute_bf16(x, cols, xp); }

  // y[t·ldy + r] for r < R, t < T: rows r0.. of W against tokens xp + t·ldx.
  template <int R, int T>
  static void tile(const Mat& m, int r0, const float* xp, size_t ldx, float* y, size_t ldy) {
    const __m256i odd_mask = _mm256_set1_epi32(int(0xffff0000u));
    const uint16_t* w = m.W + size_t(r0) * m.cols;
    __m256 acc[R][T][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();

    auto block = [&](const __m256i (&v)[R], int c) {
      __m256 we[R], wo[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        we[r] = _mm256_castsi256_ps(_mm256_slli_epi32(v[r], 16));
        wo[r] = _mm256_castsi256_ps(_mm256_and_si256(v[r], odd_mask));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        __m256 xe = _mm256_load_ps(xp + t * ldx + c);
        __m256 xo = _mm256_load_ps(xp + t * ldx + c + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
          acc[r][t][0] = _mm256_fmadd_ps(we[r], xe, acc[r][t][0]);
          acc[r][t][1] = _mm256_fmadd_ps(wo[r], xo, acc[r][t][1]);
        }
      }
    };

    const int full = m.cols / 16 * 16;
    for (int c = 0; c < full; c += 16) {
      __m256i v[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        v[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + size_t(r) * m.cols + c));
      block(v, c);
    }
    if (full < m.cols) {  // last partial block, zero-padded (x is padded too)
      __m256i v[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        alignas(32) uint16_t tail[16] = {};
        std::copy(w + size_t(r) * m.cols + full, w + size_t(r + 1) * m.cols, tail);
        v[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
      }
      block(v, full);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) y[t * ldy + r] = hsum(acc[r][t][0], acc[r][t][1]);
  }
};

// ---------------------------------------------------------------- MXFP4

struct MxMat {
  const uint8_t* packed;
  const uint8_t* scale;
  int rows, cols;
  size_t row_bytes() const { return size_t(cols) / 2 + size_t(cols) / 32; }
};

// E2M1 code -> the high / low byte of its bf16 pattern (every E2M1 value is a
// bf16 with a zero low half of the f32), for vpshufb.
constexpr std::array<uint8_t, 32> e2m1_bf16_byte(int shift) {
  std::array<uint8_t, 32> t{};
  for (int i = 0; i < 32; i++) t[i] = uint8_t(std::bit_cast<uint32_t>(kE2M1[i % 16]) >> shift);
  return t;
}
alignas(32) constexpr std::array<uint8_t, 32> kE2M1Hi = e2m1_bf16_byte(24);
alignas(32) constexpr std::array<uint8_t, 32> kE2M1Lo = e2m1_bf16_byte(16);
static_assert(kE2M1Lo[0] == 0 && kE2M1Hi[7] == 0x40 && kE2M1Lo[7] == 0xC0 && kE2M1Hi[8] == 0x80);

// E8M0 byte -> 2^(s-127) exactly; s = 0 is the subnormal 2^-127 (bit 22).
constexpr std::array<float, 256> make_e8m0_table() {
  std::array<float, 256> t{};
  for (int s = 0; s < 256; s++) t[s] = std::bit_cast<float>(s == 0 ? 0x00400000u : uint32_t(s) << 23);
  return t;
}
constexpr std::array<float, 256> kE8M0 = make_e8m0_table();

// Column (within its group of 32) of element j of vector k (A..D) from
// mx_decode: the low nibbles (even columns) land in the low 128-bit lane, the
// high nibbles in the high lane; unpacklo/hi take bytes 0-7 / 8-15; the shift
// keeps even 16-bit words, the mask odd ones.
constexpr int mx_column(int k, int j) { return 16 * (k / 2) + 4 * (j % 4) + 2 * (k % 2) + j / 4; }

void permute_mxfp4(const float* x, int cols, float* xp) {
  for (int g = 0; g < cols; g += 32)
    for (int k = 0; k < 4; k++)
      for (int j = 0; j < 8; j++) xp[g + k * 8 + j] = x[g + mx_column(k, j)];
}

// The 32 weights of one group, scaled, as 4 vectors in the order mx_column gives.
inline void mx_decode(const uint8_t* p, const float* scale, __m256 (&w)[4]) {
  const __m256i lut_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Hi.data()));
  const __m256i lut_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Lo.data()));
  const __m256i odd_mask = _mm256_set1_epi32(int(0xffff0000u));
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
  __m256i hb = _mm256_shuffle_epi8(lut_hi, codes);
  __m256i lb = _mm256_shuffle_epi8(lut_lo, codes);
  __m256i u0 = _mm256_unpacklo_epi8(lb, hb);
  __m256i u1 = _mm256_unpackhi_epi8(lb, hb);
  __m256 s = _mm256_broadcast_ss(scale);  // exact: value·2^k is representable
  w[0] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(u0, 16)), s);
  w[1] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(u0, odd_mask)), s);
  w[2] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(u1, 16)), s);
  w[3] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(u1, odd_mask)), s);
}

struct MxKernel {
  using Mat = MxMat;
  static int padded_cols(int cols) { return cols; }  // cols % 32 == 0
  static void permute(const float* x, int cols, float* xp) { permute_mxfp4(x, cols, xp); }

  template <int R, int T>
  static void tile(const Mat& m, int r0, const float* xp, size_t ldx, float* y, size_t ldy) {
    const int groups = m.cols / 32;
    const uint8_t* p = m.packed + size_t(r0) * (m.cols / 2);
    const uint8_t* s = m.scale + size_t(r0) * groups;
    __m256 acc[R][T][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();

    for (int g = 0; g < groups; g++) {
      __m256 w[R][4];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        mx_decode(p + size_t(r) * (m.cols / 2) + g * 16, &kE8M0[s[size_t(r) * groups + g]], w[r]);
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        const float* xg = xp + t * ldx + g * 32;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
          __m256 xv = _mm256_load_ps(xg + k * 8);
#pragma GCC unroll 8
          for (int r = 0; r < R; r++) acc[r][t][k & 1] = _mm256_fmadd_ps(w[r][k], xv, acc[r][t][k & 1]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) y[t * ldy + r] = hsum(acc[r][t][0], acc[r][t][1]);
  }
};

// ---------------------------------------------------------------- driver

// `count` tokens against rows r0..r0+R-1: tiles of T tokens, then smaller ones.
template <class K, int R, int T>
void tile_tokens(const typename K::Mat& m, int r0, const float* xp, size_t ldx, int count, float* y,
                 size_t ldy) {
  int t = 0;
  for (; t + T <= count; t += T) K::template tile<R, T>(m, r0, xp + t * ldx, ldx, y + t * ldy, ldy);
  if constexpr (T > 1) {
    if (t < count) tile_tokens<K, R, T - 1>(m, r0, xp + t * ldx, ldx, count - t, y + t * ldy, ldy);
  }
}

// Y[t][r] for t < n, r < rows; xp holds the n permuted tokens, ldx apart.
template <class K, int R, int T>
void run(const typename K::Mat& m, const float* xp, size_t ldx, int n, float* Y) {
  const int rows = m.rows;
  const int row_block = std::max<int>(R, int(kL2WeightBytes / m.row_bytes()) / R * R);
  const int token_block = std::max<int>(T, int(kL2ActBytes / (ldx * sizeof(float))) / T * T);
  auto body = [&](int64_t g0, int64_t g1) {
    const int r_begin = int(g0) * R, r_end = std::min<int>(rows, int(g1) * R);
    for (int rb = r_begin; rb < r_end; rb += row_block) {
      const int rb_end = std::min(r_end, rb + row_block);
      for (int t0 = 0; t0 < n; t0 += token_block) {
        const int count = std::min(n - t0, token_block);
        const float* xt = xp + size_t(t0) * ldx;
        float* yt = Y + size_t(t0) * rows;
        int r = rb;
        for (; r + R <= rb_end; r += R) tile_tokens<K, R, T>(m, r, xt, ldx, count, yt + r, rows);
        for (; r < rb_end; r++) tile_tokens<K, 1, T>(m, r, xt, ldx, count, yt + r, rows);
      }
    }
  };
  const int64_t groups = (rows + R - 1) / R;
  if (size_t(rows) * size_t(m.cols) * size_t(n) < kParallelMinMacs)
    body(0, groups);
  else
    kernels::parallel_for(groups, body);
}

template <class K, int R, int T>
void permute_and_run(const typename K::Mat& m, const float* X, int n, float* Y) {
  if (m.rows <= 0 || n <= 0) return;
  const size_t ldx = size_t(K::padded_cols(m.cols));
  float* xp = scratch(ldx * size_t(n));
  for (int t = 0; t < n; t++) K::permute(X + size_t(t) * m.cols, m.cols, xp + size_t(t) * ldx);
  run<K, R, T>(m, xp, ldx, n, Y);
}

}  // namespace

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y) {
  permute_and_run<Bf16Kernel, kMatvecRows, 1>({W, rows, cols}, x, 1, y);
}

void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y) {
  if (n == 1) return matvec_bf16(W, rows, cols, X, Y);
  permute_and_run<Bf16Kernel, kMatmulRows, kMatmulTokens>({W, rows, cols}, X, n, Y);
}

void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* x,
                  float* y) {
  permute_and_run<MxKernel, kMxMatvecRows, 1>({packed, scale, rows, cols}, x, 1, y);
}

void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* X,
                  int n, float* Y) {
  if (n == 1) return matvec_mxfp4(packed, scale, rows, cols, X, Y);
  permute_and_run<MxKernel, kMxMatmulRows, kMxMatmulTokens>({packed, scale, rows, cols}, X, n, Y);
}

}  // namespace sluice::fast::avx2

#endif  // __x86_64__
