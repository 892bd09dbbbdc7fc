// kernels/fast_tiles.h — what the x86 SIMD kernel files share (internal).
//
// Included only by fast_avx2.cpp and fast_avx512.cpp, each compiled for its
// own instruction set. Everything here has internal linkage (an anonymous
// namespace), so each file gets its own copy built with its own flags and the
// linker never mixes an AVX-512 body into the AVX2 path.
//
// It holds the parts that fix the results' bits for both files — the permuted
// activation layouts (the reduction order of fast_avx2.cpp's header comment)
// and the final per-row sum — and the driver that blocks rows, tokens and
// columns and splits rows over the thread pool. A kernel K plugs in with:
//   using Mat;  Mat::rows, Mat::cols, Mat::row_bytes()
//   static constexpr bool kColumnChunks;   // bf16: column chunks (L1); MXFP4: whole rows
//   static int padded_cols(int cols);  static void permute(const float* x, int cols, float* xp);
//   template <int R, int T> static void tile(const Mat&, const TileIo&);  // R rows × T tokens
#pragma once
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "base/numeric.h"
#include "kernels/threads.h"

namespace sluice::fast {
namespace {

constexpr size_t kL2WeightBytes = 256 << 10;  // weight rows kept hot per row block (L2)
constexpr size_t kL1ActBytes = 16 << 10;      // activations of a token block × column chunk (L1)
constexpr size_t kL2ActBytes = 256 << 10;     // activations of a token block, whole rows (L2)
constexpr int kColumnChunk = 512;             // columns per chunk (a multiple of 64)
// Below this many multiply-adds a call runs on the calling thread alone: waking
// the pool costs more than it saves.
constexpr size_t kParallelMinMacs = size_t(1) << 17;

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Weights are prefetched this far ahead of use, one cache line at a time per
// row: the FMA chains fill the out-of-order window long before the hardware
// prefetcher alone keeps enough lines in flight (bf16 7168x7168 on 2 threads
// went from 0.73 to 0.96 of the read ceiling). bf16 is memory-bound and does
// best prefetching into L2; MXFP4 is decode-bound and wants its lines in L1.
// Measured in docs/kernels.md (AVX2; the AVX-512 bodies use the same).
constexpr int kBf16PrefetchBytes = 2048;
constexpr int kMxPrefetchBytes = 1024;
inline void prefetch_l2(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
inline void prefetch_l1(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

// How far past column c of a bf16 row (in a tile of R rows, `cols` long) to
// prefetch: kBf16PrefetchBytes on, and near the row's end the same distance
// into the same row of the next tile (R rows on) rather than into the next row,
// which the tile is already reading. Without it every row's first 2 KiB came
// with no prefetch: 0.67-0.73 of the read ceiling on this Zen 5 VM against
// 0.75-0.79 with it (bf16 7168x7168 from DRAM, 2 threads).
template <int R>
inline size_t bf16_prefetch_ahead(int c, int cols) {
  const int at = c + kBf16PrefetchBytes / 2;
  return size_t(at) + (at >= cols ? size_t(R - 1) * size_t(cols) : 0);
}

// Keeps a loaded vector in a register: without it GCC folds the load into
// every FMA that uses it, and a tile reloads each activation once per row.
template <class V>
inline void in_register(V& v) {
  asm("" : "+v"(v));
}

// 64-byte aligned float scratch owned by the calling thread, one per purpose
// (permuted activations on the caller, parked accumulators on each worker);
// grows, never shrinks.
enum ScratchSlot { kActivations, kPartials, kScratchSlots };
float* scratch(ScratchSlot slot, size_t n) {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float, Free> buf[kScratchSlots];
  thread_local size_t cap[kScratchSlots] = {};
  if (n > cap[slot]) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    buf[slot].reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!buf[slot]) throw std::bad_alloc();
    cap[slot] = n;
  }
  return buf[slot].get();
}

// What one tile call works on: columns [c0, c1) of rows r0.. against tokens
// xp, xp + ldx, ...; c0 and c1 are multiples of the kernel's block, or c1 is
// the end of the row. Between column chunks the accumulators of pair (r, t)
// wait at partials + r·partials_row + t·16.
struct TileIo {
  int r0, c0, c1;
  const float* xp;
  size_t ldx;
  float* partials;
  size_t partials_row;
  bool first, last;  // first / last column chunk of the row
  float* y;          // y[t·ldy + r]
  size_t ldy;
};

// The fixed final reduction of one (row, token) pair.
inline float hsum(__m256 a0, __m256 a1) {
  __m256 v = _mm256_add_ps(a0, a1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct Bf16Mat {
  const uint16_t* W;
  int rows, cols;
  size_t row_bytes() const { return size_t(cols) * 2; }
};

void permute_bf16(const float* x, int cols, float* xp) {
  int padded = round_up(cols, 16);
  for (int c = 0; c < padded; c++) xp[c / 16 * 16 + (c & 1) * 8 + (c % 16) / 2] = c < cols ? x[c] : 0.0f;
}

struct MxMat {
  const uint8_t* packed;
  const uint8_t* scale;
  int rows, cols;
  size_t row_bytes() const { return size_t(cols) / 2 + size_t(cols) / 32; }
};

// E2M1 code -> the high / low byte of its bf16 pattern (every E2M1 value is a
// bf16: the low half of its f32 is zero), for vpshufb.
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

// Column, within a pair of groups (64 columns), of element j of vector k as
// mx_decode_pair emits them. The 32 packed bytes of groups g, g+1 sit in the
// two 128-bit lanes, so elements 0-3 of every vector come from group g and
// 4-7 from g+1. Vectors 0-3 hold the low nibbles (even columns), 4-7 the
// high ones; in each half, unpacklo/hi take bytes 0-7 / 8-15 of the lane and
// the shift / mask keep the even / odd byte of each pair.
constexpr int mx_column(int k, int j) {
  int byte = 8 * ((k % 4) / 2) + 2 * (j % 4) + k % 2;
  return 32 * (j / 4) + 2 * byte + k / 4;
}

// x for MXFP4: per 64 columns in mx_column order; an odd last group is padded
// with zeros (its weights are decoded as zeros too).
void permute_mxfp4(const float* x, int cols, float* xp) {
  for (int base = 0; base < cols; base += 64)
    for (int k = 0; k < 8; k++)
      for (int j = 0; j < 8; j++) {
        int c = base + mx_column(k, j);
        xp[base + k * 8 + j] = c < cols ? x[c] : 0.0f;
      }
}
// ---------------------------------------------------------------- driver

// `count` tokens against rows io.r0.. : tiles of T tokens, then smaller ones.
template <class K, int R, int T>
void tile_tokens(const typename K::Mat& m, TileIo io, int count) {
  int t = 0;
  for (; t + T <= count; t += T) {
    K::template tile<R, T>(m, io);
    io.xp += T * io.ldx;
    io.y += T * io.ldy;
    io.partials += T * 16;
  }
  if constexpr (T > 1) {
    if (t < count) tile_tokens<K, R, T - 1>(m, io, count - t);
  }
}

// Y[t][r] for t < n, r < rows; xp holds the n permuted tokens, ldx apart.
template <class K, int R, int T>
void run(const typename K::Mat& m, const float* xp, size_t ldx, int n, float* Y) {
  const int rows = m.rows, cols = m.cols;
  // One token: no blocking (the weights stream through once anyway).
  // bf16 is FMA-bound with many tokens and wants their activations in L1:
  // column chunks. MXFP4 is decode-bound; whole rows, activations from L2.
  const int chunk = n == 1 || !K::kColumnChunks ? cols : kColumnChunk;
  const size_t act_budget = K::kColumnChunks ? kL1ActBytes : kL2ActBytes;
  const int token_block =
      n == 1 ? 1 : std::max<int>(T, int(act_budget / (std::min<size_t>(chunk, ldx) * sizeof(float))) / T * T);
  const int row_block = n == 1 ? rows : std::max<int>(R, int(kL2WeightBytes / m.row_bytes()) / R * R);
  const bool chunked = chunk < cols;
  auto body = [&](int64_t g0, int64_t g1) {
    const int r_begin = int(g0) * R, r_end = std::min<int>(rows, int(g1) * R);
    float* partials = chunked ? scratch(kPartials, size_t(row_block) * token_block * 16) : nullptr;
    for (int rb = r_begin; rb < r_end; rb += row_block) {
      const int rb_end = std::min(r_end, rb + row_block);
      for (int t0 = 0; t0 < n; t0 += token_block) {
        const int count = std::min(n - t0, token_block);
        for (int c0 = 0; c0 < cols; c0 += chunk) {
          TileIo io;
          io.c0 = c0;
          io.c1 = std::min(cols, c0 + chunk);
          io.xp = xp + size_t(t0) * ldx;
          io.ldx = ldx;
          io.partials_row = size_t(token_block) * 16;
          io.first = c0 == 0;
          io.last = io.c1 == cols;
          io.ldy = size_t(rows);
          int r = rb;
          for (; r < rb_end; r += R) {
            io.r0 = r;
            io.partials = partials + size_t(r - rb) * io.partials_row;
            io.y = Y + size_t(t0) * rows + r;
            if (r + R <= rb_end) {
              tile_tokens<K, R, T>(m, io, count);
            } else {
              for (; io.r0 < rb_end; io.r0++, io.partials += io.partials_row, io.y++)
                tile_tokens<K, 1, T>(m, io, count);
            }
          }
        }
      }
    }
  };
  const int64_t groups = (rows + R - 1) / R;
  if (size_t(rows) * size_t(cols) * size_t(n) < kParallelMinMacs)
    body(0, groups);
  else
    kernels::parallel_for(groups, body);
}

template <class K, int R, int T>
void permute_and_run(const typename K::Mat& m, const float* X, int n, float* Y) {
  if (m.rows <= 0 || n <= 0) return;
  const size_t ldx = size_t(K::padded_cols(m.cols));
  float* xp = scratch(kActivations, ldx * size_t(n));
  for (int t = 0; t < n; t++) K::permute(X + size_t(t) * m.cols, m.cols, xp + size_t(t) * ldx);
  run<K, R, T>(m, xp, ldx, n, Y);
}
}  // namespace
}  // namespace sluice::fast

#endif  // __x86_64__
