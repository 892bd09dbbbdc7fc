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
//   MXFP4: groups (32 columns, one scale) are taken in pairs; x is permuted
//          into blocks of 64 in the order the decoder emits the 8 vectors of
//          a pair (mx_column below; lanes 0-3 hold group g, 4-7 group g+1),
//          zero-padded to a multiple of 64. For each pair in order:
//          part_0 = w0·x0 + w2·x2 + w4·x4 + w6·x6 and part_1 likewise over
//          the odd vectors (mul then FMAs, in that order, w unscaled), then
//          acc_i += part_i · 2^(s-127) (FMA, per-lane scale of its group).
//   int8:  x is quantized per call (ref::quantize_int16_groups: int16 codes
//          and one fp32 scale per group of 128 columns, zero-padded to whole
//          groups). For each group in order: part = Σ over its blocks of 16
//          of vpmaddwd(q, xq) (8 int32 lanes, exact), then
//          acc_0 += float(part) · (scale · xscale) (FMA); acc_1 stays zero.
//   Then y = hsum(acc_0 + acc_1), hsum adding the two 128-bit halves, then
//   the high pair onto the low pair, then lane 1 onto lane 0.
//
// A tile computes R rows × T tokens at once; each (row, token) pair has its
// own accumulators and sees exactly the sequence above, so tiling changes
// speed, never bits. Rows are split over threads in groups of R. For matmul a
// thread blocks its rows so a block of weights stays in L2 while every token
// passes over it (weights come from memory once per call), and walks the
// columns in chunks so the activations of a block of tokens stay in L1; the
// accumulators are parked in a small buffer between column chunks, which
// keeps the per-lane FMA sequence unchanged. That driver, the activation
// layouts and the final sum live in fast_tiles.h, shared with
// fast_avx512.cpp (the same sequence, two rows per 512-bit register).
#if defined(__x86_64__)

#include "kernels/fast_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/numeric.h"
#include "kernels/fast_tiles.h"
#include "kernels/ref.h"
#include "kernels/threads.h"

namespace sluice::fast::avx2 {
namespace {

// Tiling. Changing these changes speed only (kernels_test checks that).
constexpr int kMatvecRows = 4;      // rows per matvec tile (memory streams in flight)
constexpr int kMatmulRows = 2;      // rows × tokens per matmul tile: 2·R·T accumulators
constexpr int kMatmulTokens = 2;    //   must fit the 16 ymm registers with the weights
constexpr int kMxMatvecRows = 1;
constexpr int kMxMatmulRows = 1;
constexpr int kMxMatmulTokens = 2;
constexpr int kInt8MatvecRows = 1;   // one row at a time beat 2 and 4 (docs/kernels.md)
constexpr int kInt8MatmulRows = 1;
constexpr int kInt8MatmulTokens = 2;

// int8 rows are prefetched further ahead than bf16 and MXFP4 (fast_tiles.h):
// 8 KB into L2 (docs/kernels.md).
constexpr int kInt8PrefetchBytes = 8192;

// Accumulators of an R × T tile: zero (or taken back from the partials) at
// the start of a column chunk, reduced into y (or parked) at its end.
template <int R, int T>
struct TileAcc {
  __m256 v[R][T][2];

  explicit TileAcc(const TileIo& io) {
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        if (io.first) {
          v[r][t][0] = v[r][t][1] = _mm256_setzero_ps();
        } else {
          const float* p = io.partials + r * io.partials_row + t * 16;
          v[r][t][0] = _mm256_load_ps(p);
          v[r][t][1] = _mm256_load_ps(p + 8);
        }
      }
  }

  void finish(const TileIo& io) {
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        if (io.last) {
          io.y[t * io.ldy + r] = hsum(v[r][t][0], v[r][t][1]);
        } else {
          float* p = io.partials + r * io.partials_row + t * 16;
          _mm256_store_ps(p, v[r][t][0]);
          _mm256_store_ps(p + 8, v[r][t][1]);
        }
      }
  }
};

// ---------------------------------------------------------------- bf16

struct Bf16Kernel {
  using Mat = Bf16Mat;
  static constexpr bool kColumnChunks = true;
  static int padded_cols(int cols) { return round_up(cols, 16); }
  static void permute(const float* x, int cols, float* xp) { permute_bf16(x, cols, xp); }

  template <int R, int T>
  static void tile(const Mat& m, const TileIo& io) {
    const __m256i odd_mask = _mm256_set1_epi32(int(0xffff0000u));
    const uint16_t* w = m.W + size_t(io.r0) * m.cols;
    TileAcc<R, T> acc(io);

    auto block = [&](const __m256i (&v)[R], int c) {
      __m256 we[R], wo[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        we[r] = _mm256_castsi256_ps(_mm256_slli_epi32(v[r], 16));
        wo[r] = _mm256_castsi256_ps(_mm256_and_si256(v[r], odd_mask));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        __m256 xe = _mm256_load_ps(io.xp + t * io.ldx + c);
        __m256 xo = _mm256_load_ps(io.xp + t * io.ldx + c + 8);
        if constexpr (R > 1) {
          in_register(xe);
          in_register(xo);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
          acc.v[r][t][0] = _mm256_fmadd_ps(we[r], xe, acc.v[r][t][0]);
          acc.v[r][t][1] = _mm256_fmadd_ps(wo[r], xo, acc.v[r][t][1]);
        }
      }
    };

    const int full_end = std::min(io.c1, m.cols / 16 * 16);
    for (int c = io.c0; c < full_end; c += 16) {
      __m256i v[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const uint16_t* wr = w + size_t(r) * m.cols + c;
        if (c % 32 == 0) prefetch_l2(w + size_t(r) * m.cols + bf16_prefetch_ahead<R>(c, m.cols));
        v[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr));
      }
      block(v, c);
    }
    if (full_end < io.c1) {  // the row's last partial block, zero-padded (x is padded too)
      __m256i v[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        alignas(32) uint16_t tail[16] = {};
        std::memcpy(tail, w + size_t(r) * m.cols + full_end, size_t(io.c1 - full_end) * 2);
        v[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
      }
      block(v, full_end);
    }
    acc.finish(io);
  }
};

// ---------------------------------------------------------------- MXFP4


// The 64 unscaled weights of a pair of groups (32 packed bytes), as 8 bf16
// vectors widened to f32, passed to use(k, w) in order k = 0..7.
template <class Use>
inline void mx_decode_pair(__m256i packed, Use&& use) {
  const __m256i lut_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Hi.data()));
  const __m256i lut_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Lo.data()));
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i odd_mask = _mm256_set1_epi32(int(0xffff0000u));
  const __m256i codes[2] = {_mm256_and_si256(packed, nibble),
                            _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble)};
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    __m256i hb = _mm256_shuffle_epi8(lut_hi, codes[h]);
    __m256i lb = _mm256_shuffle_epi8(lut_lo, codes[h]);
    __m256i u0 = _mm256_unpacklo_epi8(lb, hb), u1 = _mm256_unpackhi_epi8(lb, hb);
    use(4 * h + 0, _mm256_castsi256_ps(_mm256_slli_epi32(u0, 16)));
    use(4 * h + 1, _mm256_castsi256_ps(_mm256_and_si256(u0, odd_mask)));
    use(4 * h + 2, _mm256_castsi256_ps(_mm256_slli_epi32(u1, 16)));
    use(4 * h + 3, _mm256_castsi256_ps(_mm256_and_si256(u1, odd_mask)));
  }
}

// The packed bytes of groups g, g+1 of a row and their scales, one per
// 128-bit lane; an odd last group gets zeros (decoded as +0) in the high lane.
inline void mx_load_pair(const uint8_t* prow, const uint8_t* srow, int g, int groups, __m256i* v,
                         __m256* scale) {
  const uint8_t* pr = prow + size_t(g) * 16;
  if (g + 1 < groups) [[likely]] {
    *v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pr));
    *scale = _mm256_blend_ps(_mm256_broadcast_ss(&kE8M0[srow[g]]), _mm256_broadcast_ss(&kE8M0[srow[g + 1]]),
                             0xf0);
  } else {
    *v = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pr)));
    *scale = _mm256_broadcast_ss(&kE8M0[srow[g]]);
  }
}

// One pair of groups against T tokens: per token two unscaled partial sums
// (even / odd vectors, mul then FMAs in k order), then acc += partial · scale.
template <int T, class Weights>
inline void mx_pair_fma(Weights&& w, const float* xp, size_t ldx, __m256 scale, __m256 (&acc)[T][2]) {
  __m256 part[T][2];
#pragma GCC unroll 8
  for (int k = 0; k < 8; k++) {
    __m256 wk = w(k);
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
      __m256 xv = _mm256_load_ps(xp + t * ldx + k * 8);
      part[t][k & 1] = k < 2 ? _mm256_mul_ps(wk, xv) : _mm256_fmadd_ps(wk, xv, part[t][k & 1]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; t++) {
    acc[t][0] = _mm256_fmadd_ps(part[t][0], scale, acc[t][0]);
    acc[t][1] = _mm256_fmadd_ps(part[t][1], scale, acc[t][1]);
  }
}

struct MxKernel {
  using Mat = MxMat;
  static constexpr bool kColumnChunks = false;
  static int padded_cols(int cols) { return round_up(cols, 64); }
  static void permute(const float* x, int cols, float* xp) { permute_mxfp4(x, cols, xp); }

  template <int R, int T>
  static void tile(const Mat& m, const TileIo& io) {
    const int groups = m.cols / 32;
    const size_t prow = size_t(m.cols) / 2, srow = size_t(groups);
    const uint8_t* p = m.packed + size_t(io.r0) * prow;
    const uint8_t* s = m.scale + size_t(io.r0) * srow;
    TileAcc<R, T> acc(io);
    for (int g = io.c0 / 32; g < io.c1 / 32; g += 2) {
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        const uint8_t* pr = p + size_t(r) * prow;
        const uint8_t* sr = s + size_t(r) * srow;
        if (g % 4 == 0) prefetch_l1(pr + size_t(g) * 16 + kMxPrefetchBytes);
        if (g % 64 == 0) prefetch_l1(sr + g + kMxPrefetchBytes / 16);
        __m256i v;
        __m256 scale;
        mx_load_pair(pr, sr, g, groups, &v, &scale);
        __m256 w[8];
        mx_decode_pair(v, [&](int k, __m256 wk) { w[k] = wk; });
        mx_pair_fma<T>([&](int k) { return w[k]; }, io.xp + size_t(g) * 32, io.ldx, scale, acc.v[r]);
      }
    }
    acc.finish(io);
  }
};

// ---------------------------------------------------------------- int8

struct Int8Mat {
  const uint8_t* W;  // rows of ref::int8_row_bytes(cols): fp32 scales, then int8 codes
  int rows, cols;
  size_t row_bytes() const { return size_t(ref::int8_row_bytes(cols)); }
};

// 16 int8 codes at q as 16 int16 lanes (one load the sign-extension takes as its operand).
inline __m256i int8_widen16(const uint8_t* q) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

// ref::quantize_int16_groups with 8 lanes: the same max (exact in any order),
// the same scale and the same products, rounded half-even by vcvtps2dq (the
// default rounding mode, as std::nearbyint): the same bits. xq holds
// round_up(cols, kInt8Group) values; the last group's padding is zeros.
void quantize_int16_groups(const float* x, int cols, int16_t* xq, float* xscale) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  constexpr int G = ref::kInt8Group;
  for (int g = 0; g < ref::int8_groups(cols); g++) {
    const int c0 = g * G, n = std::min(G, cols - c0);
    const float* src = x + c0;
    alignas(32) float tail[G];
    if (n < G) {
      std::memcpy(tail, src, size_t(n) * sizeof(float));
      std::fill(tail + n, tail + G, 0.0f);
      src = tail;
    }
    __m256 m = _mm256_setzero_ps(), finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
#pragma GCC unroll 16
    for (int k = 0; k < G; k += 8) {
      const __m256 a = _mm256_and_ps(_mm256_loadu_ps(src + k), abs_mask);
      m = _mm256_max_ps(m, a);
      finite = _mm256_and_ps(finite, _mm256_cmp_ps(a, largest, _CMP_LE_OQ));
    }
    const float mx = hmax(m);
    const bool all_finite = _mm256_movemask_ps(finite) == 0xff;
    if (!all_finite || mx < ref::kInt16Tiny) {
      std::fill(xq + c0, xq + c0 + G, int16_t(0));
      xscale[g] = all_finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    xscale[g] = mx / ref::kInt16Max;
    const __m256 inv = _mm256_set1_ps(ref::kInt16Max / mx);
#pragma GCC unroll 8
    for (int k = 0; k < G; k += 16) {
      const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + k), inv));
      const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + k + 8), inv));
      // packs works within 128-bit halves: a0-3 b0-3 a4-7 b4-7; put them in order.
      const __m256i ab = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + c0 + k), ab);
    }
  }
}

namespace {

// A token's activations for the int8 kernel (ldx floats each): int16 codes
// for round_up(cols, kInt8Group) columns, then the groups' fp32 scales.
struct Int8Kernel {
  using Mat = Int8Mat;
  static constexpr bool kColumnChunks = false;
  static int code_cols(int cols) { return round_up(cols, ref::kInt8Group); }
  static int padded_cols(int cols) { return code_cols(cols) / 2 + round_up(ref::int8_groups(cols), 8); }
  static const int16_t* codes_of(const float* xp) { return reinterpret_cast<const int16_t*>(xp); }
  static const float* scales_of(const float* xp, int cols) { return xp + code_cols(cols) / 2; }
  static void permute(const float* x, int cols, float* xp) {
    quantize_int16_groups(x, cols, reinterpret_cast<int16_t*>(xp), xp + code_cols(cols) / 2);
    std::fill(xp + code_cols(cols) / 2 + ref::int8_groups(cols), xp + padded_cols(cols), 0.0f);
  }

  // Per group of 128 columns: 8 blocks of 16, each widened to int16 once and
  // multiplied by every token's codes with vpmaddwd (pairs summed into 8
  // int32 lanes: exact), then the lanes, converted, times scale · xscale
  // into the FP32 accumulator. 2 µops of arithmetic per 16 weights and
  // token, against 6 when each weight is converted to float.
  template <int R, int T>
  static void tile(const Mat& m, const TileIo& io) {
    const int groups = ref::int8_groups(m.cols);
    const size_t row_bytes = m.row_bytes();
    const uint8_t* base = m.W + size_t(io.r0) * row_bytes;
    const uint8_t* codes = base + 4 * size_t(groups);
    TileAcc<R, T> acc(io);
    __m256i part[R][T];
    auto block = [&](int c, const __m256i (&w)[R]) __attribute__((always_inline)) {
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes_of(io.xp + t * io.ldx) + c));
        if constexpr (R > 1) in_register(xv);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) part[r][t] = _mm256_add_epi32(part[r][t], _mm256_madd_epi16(w[r], xv));
      }
    };
    for (int g = 0; g < groups; g++) {
      const int c0 = g * ref::kInt8Group, c1 = std::min(m.cols, c0 + ref::kInt8Group);
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) part[r][t] = _mm256_setzero_si256();
      if (c1 - c0 == ref::kInt8Group) [[likely]] {
#pragma GCC unroll 8
        for (int k = 0; k < ref::kInt8Group / 16; k++) {
          __m256i w[R];
#pragma GCC unroll 8
          for (int r = 0; r < R; r++) {
            const uint8_t* q = codes + size_t(r) * row_bytes + c0 + 16 * k;
            if (k % 4 == 0) prefetch_l2(q + kInt8PrefetchBytes);
            w[r] = int8_widen16(q);
          }
          block(c0 + 16 * k, w);
        }
      } else {  // the row's last, shorter group; a partial block is zero-padded (x is padded too)
        for (int c = c0; c < c1; c += 16) {
          __m256i w[R];
#pragma GCC unroll 8
          for (int r = 0; r < R; r++) {
            alignas(16) uint8_t tail[16] = {};
            std::memcpy(tail, codes + size_t(r) * row_bytes + c, size_t(std::min(16, c1 - c)));
            w[r] = int8_widen16(tail);
          }
          block(c, w);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        float sc;
        std::memcpy(&sc, base + size_t(r) * row_bytes + 4 * size_t(g), 4);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
          const __m256 s = _mm256_set1_ps(sc * scales_of(io.xp + t * io.ldx, m.cols)[g]);
          acc.v[r][t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(part[r][t]), s, acc.v[r][t][0]);
        }
      }
    }
    acc.finish(io);
  }
};


}  // namespace

void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y) {
  permute_and_run<Int8Kernel, kInt8MatvecRows, 1>({W, rows, cols}, x, 1, y);
}

void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y) {
  if (n == 1) return matvec_int8(W, rows, cols, X, Y);
  permute_and_run<Int8Kernel, kInt8MatmulRows, kInt8MatmulTokens>({W, rows, cols}, X, n, Y);
}

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
