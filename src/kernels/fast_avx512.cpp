// AVX-512 bodies of the bf16 and MXFP4 products (see fast_avx512.h): the
// same bits as fast_avx2.cpp, twice the work per instruction.
//
// A 512-bit register holds two rows side by side: lanes 0-7 belong to row a,
// lanes 8-15 to row b, and each half goes through exactly the 8-lane sequence
// of fast_avx2.cpp's header comment (the same permuted activations, broadcast
// to both halves; the same decode, whose byte shuffles and unpacks work
// within 128-bit lanes; the same mul / FMA order; the same final sum, taken
// per half). Every (row, token) pair therefore sees the AVX2 file's
// operations on the same values, and its result has the same bits
// (kernels_test checks it on random shapes). What is gained: the MXFP4
// decode, the bound of MXFP4 products on AVX2, covers two rows per
// instruction, and a matmul tile reuses one decode across up to eight tokens
// (32 registers instead of 16).
//
// A tile of R rows takes them in pairs; an odd last row is paired with
// itself (computed twice, stored once).
#if defined(__x86_64__)

#include "kernels/fast_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/fast_tiles.h"

// GCC 12 warns about the undefined pass-through operands inside its own
// AVX-512 intrinsics (GCC bug 105593, fixed in 13): "maybe" when optimising,
// "is used" at -O1 with the sanitizers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace sluice::fast::avx512 {
namespace {

// Tiling (rows are taken in pairs). Changing these changes speed only.
constexpr int kMatvecRows = 8;  // bf16: memory-bound, rows = streams in flight
constexpr int kMatmulRows = 4;  // bf16 R × T tile: R·T accumulator registers (24 of 32)
constexpr int kMatmulTokens = 6;  // 6 beat 4 (and 4 × 5, 6 × 4, 8 × 3): 196-225 GFLOP/s vs 181-189 at n = 64
constexpr int kMxMatvecRows = 4;  // MXFP4: decode-bound; two pairs per pass beat one (21.3 vs 19.4 GB/s)
constexpr int kMxMatmulRows = 2;
constexpr int kMxMatmulTokens = 8;  // one decode, eight tokens

// Row a's 256 bits in the low half, row b's in the high half.
inline __m512i load_rows(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(b)), 1);
}
inline __m512 join(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_zextps256_ps512(lo), hi, 1); }
// 8 permuted activations (32-byte aligned) in both halves.
inline __m512 both_halves(const float* p) { return _mm512_broadcast_f32x8(_mm256_load_ps(p)); }
inline __m256 half(__m512 v, int h) { return h == 0 ? _mm512_castps512_ps256(v) : _mm512_extractf32x8_ps(v, 1); }

// Row of pair p, half h, in a tile of R rows (an odd last row pairs with itself).
template <int R>
constexpr int pair_row(int p, int h) {
  return std::min(2 * p + h, R - 1);
}

// Accumulators of an R × T tile in row pairs; the partials keep fast_avx2's
// per-row layout (row r, token t at r·partials_row + t·16: acc_0 then acc_1).
template <int R, int T>
struct PairAcc {
  static constexpr int P = (R + 1) / 2;
  __m512 v[P][T][2];

  explicit PairAcc(const TileIo& io) {
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        if (io.first) {
          v[p][t][0] = v[p][t][1] = _mm512_setzero_ps();
        } else {
          const float* a = io.partials + pair_row<R>(p, 0) * io.partials_row + t * 16;
          const float* b = io.partials + pair_row<R>(p, 1) * io.partials_row + t * 16;
          v[p][t][0] = join(_mm256_load_ps(a), _mm256_load_ps(b));
          v[p][t][1] = join(_mm256_load_ps(a + 8), _mm256_load_ps(b + 8));
        }
      }
  }

  void finish(const TileIo& io) {
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
#pragma GCC unroll 8
      for (int t = 0; t < T; t++)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
          const int r = 2 * p + h;
          if (r >= R) continue;
          if (io.last) {
            io.y[t * io.ldy + r] = hsum(half(v[p][t][0], h), half(v[p][t][1], h));
          } else {
            float* q = io.partials + r * io.partials_row + t * 16;
            _mm256_store_ps(q, half(v[p][t][0], h));
            _mm256_store_ps(q + 8, half(v[p][t][1], h));
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
    constexpr int P = PairAcc<R, T>::P;
    const __m512i odd_mask = _mm512_set1_epi32(int(0xffff0000u));
    const uint16_t* row[P][2];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
      for (int h = 0; h < 2; h++) row[p][h] = m.W + size_t(io.r0 + pair_row<R>(p, h)) * m.cols;
    PairAcc<R, T> acc(io);

    auto block = [&](const __m512i (&v)[P], int c) {
      __m512 we[P], wo[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; p++) {
        we[p] = _mm512_castsi512_ps(_mm512_slli_epi32(v[p], 16));
        wo[p] = _mm512_castsi512_ps(_mm512_and_si512(v[p], odd_mask));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        __m512 xe = both_halves(io.xp + t * io.ldx + c);
        __m512 xo = both_halves(io.xp + t * io.ldx + c + 8);
        if constexpr (P > 1) {
          in_register(xe);
          in_register(xo);
        }
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
          acc.v[p][t][0] = _mm512_fmadd_ps(we[p], xe, acc.v[p][t][0]);
          acc.v[p][t][1] = _mm512_fmadd_ps(wo[p], xo, acc.v[p][t][1]);
        }
      }
    };

    const int full_end = std::min(io.c1, m.cols / 16 * 16);
    for (int c = io.c0; c < full_end; c += 16) {
      __m512i v[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; p++) {
        if (c % 32 == 0) {
          const size_t ahead = bf16_prefetch_ahead<R>(c, m.cols);
          prefetch_l2(row[p][0] + ahead);
          if (2 * p + 1 < R) prefetch_l2(row[p][1] + ahead);
        }
        v[p] = load_rows(row[p][0] + c, row[p][1] + c);
      }
      block(v, c);
    }
    if (full_end < io.c1) {  // the rows' last partial block, zero-padded (x is padded too)
      __m512i v[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; p++) {
        alignas(32) uint16_t tail[2][16] = {};
        for (int h = 0; h < 2; h++) std::memcpy(tail[h], row[p][h] + full_end, size_t(io.c1 - full_end) * 2);
        v[p] = load_rows(tail[0], tail[1]);
      }
      block(v, full_end);
    }
    acc.finish(io);
  }
};

// ---------------------------------------------------------------- MXFP4

// fast_avx2.cpp's mx_decode_pair on two rows at once: the 8 vectors of a
// pair of groups, row a's in the low halves, row b's in the high ones.
template <class Use>
inline void mx_decode_pair2(__m512i packed, Use&& use) {
  const __m512i lut_hi = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Hi.data())));
  const __m512i lut_lo = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Lo.data())));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i odd_mask = _mm512_set1_epi32(int(0xffff0000u));
  const __m512i codes[2] = {_mm512_and_si512(packed, nibble),
                            _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble)};
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    __m512i hb = _mm512_shuffle_epi8(lut_hi, codes[h]);
    __m512i lb = _mm512_shuffle_epi8(lut_lo, codes[h]);
    __m512i u0 = _mm512_unpacklo_epi8(lb, hb), u1 = _mm512_unpackhi_epi8(lb, hb);
    use(4 * h + 0, _mm512_castsi512_ps(_mm512_slli_epi32(u0, 16)));
    use(4 * h + 1, _mm512_castsi512_ps(_mm512_and_si512(u0, odd_mask)));
    use(4 * h + 2, _mm512_castsi512_ps(_mm512_slli_epi32(u1, 16)));
    use(4 * h + 3, _mm512_castsi512_ps(_mm512_and_si512(u1, odd_mask)));
  }
}

// fast_avx2.cpp's mx_load_pair for two rows: groups g, g+1 of each (an odd
// last group: zeros in its 128-bit lane, both lanes scaled by group g).
inline void mx_load_pair2(const uint8_t* const (&prow)[2], const uint8_t* const (&srow)[2], int g, int groups,
                          __m512i* v, __m512* scale) {
  if (g + 1 < groups) [[likely]] {
    *v = load_rows(prow[0] + size_t(g) * 16, prow[1] + size_t(g) * 16);
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m128 s4 = _mm_setr_ps(kE8M0[srow[0][g]], kE8M0[srow[0][g + 1]], kE8M0[srow[1][g]], kE8M0[srow[1][g + 1]]);
    *scale = _mm512_permutexvar_ps(spread, _mm512_zextps128_ps512(s4));
  } else {
    __m256i lo = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(prow[0] + size_t(g) * 16)));
    __m256i hi = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(prow[1] + size_t(g) * 16)));
    *v = _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
    *scale = join(_mm256_set1_ps(kE8M0[srow[0][g]]), _mm256_set1_ps(kE8M0[srow[1][g]]));
  }
}

struct MxKernel {
  using Mat = MxMat;
  static constexpr bool kColumnChunks = false;
  static int padded_cols(int cols) { return round_up(cols, 64); }
  static void permute(const float* x, int cols, float* xp) { permute_mxfp4(x, cols, xp); }

  template <int R, int T>
  static void tile(const Mat& m, const TileIo& io) {
    constexpr int P = PairAcc<R, T>::P;
    const int groups = m.cols / 32;
    const size_t prow_bytes = size_t(m.cols) / 2, srow_bytes = size_t(groups);
    const uint8_t* prow[P][2];
    const uint8_t* srow[P][2];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
      for (int h = 0; h < 2; h++) {
        prow[p][h] = m.packed + size_t(io.r0 + pair_row<R>(p, h)) * prow_bytes;
        srow[p][h] = m.scale + size_t(io.r0 + pair_row<R>(p, h)) * srow_bytes;
      }
    PairAcc<R, T> acc(io);
    for (int g = io.c0 / 32; g < io.c1 / 32; g += 2) {
#pragma GCC unroll 8
      for (int p = 0; p < P; p++) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
          if (h == 1 && 2 * p + 1 >= R) break;
          if (g % 4 == 0) prefetch_l1(prow[p][h] + size_t(g) * 16 + kMxPrefetchBytes);
          if (g % 64 == 0) prefetch_l1(srow[p][h] + g + kMxPrefetchBytes / 16);
        }
        __m512i v;
        __m512 scale;
        mx_load_pair2(prow[p], srow[p], g, groups, &v, &scale);
        __m512 w[8];
        mx_decode_pair2(v, [&](int k, __m512 wk) { w[k] = wk; });
        const float* xg = io.xp + size_t(g) * 32;
        // Per token: the two unscaled partial sums (even / odd vectors, mul
        // then FMAs in k order), then acc += partial · scale.
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
          __m512 part[2];
#pragma GCC unroll 8
          for (int k = 0; k < 8; k++) {
            const __m512 xv = both_halves(xg + t * io.ldx + k * 8);
            part[k & 1] = k < 2 ? _mm512_mul_ps(w[k], xv) : _mm512_fmadd_ps(w[k], xv, part[k & 1]);
          }
          acc.v[p][t][0] = _mm512_fmadd_ps(part[0], scale, acc.v[p][t][0]);
          acc.v[p][t][1] = _mm512_fmadd_ps(part[1], scale, acc.v[p][t][1]);
        }
      }
    }
    acc.finish(io);
  }
};

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

}  // namespace sluice::fast::avx512

#endif  // __x86_64__
