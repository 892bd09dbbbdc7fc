// kernels/cuda/mxfp4_warp.cu — the MXFP4 decode GEMV (one token per task)
// with a warp per row: the reduction order of mxfp4.cu ("lane l of a warp
// sums q_l, q_{l+32}, ... then a xor butterfly") is exactly a warp walking a
// row, lane l taking groups l, l+32, ... So no partial sums go through shared
// memory and no barrier is needed but when the block moves to another task
// (its activations replace the old ones in shared memory).
//
// A warp takes R consecutive rows (2 or 4) of one task: per group, R 16-byte
// code words and R scale bytes per lane; the group's activations (32 floats,
// read 8 at a time from shared memory) serve all R rows. When a row's last
// round of groups is at most half a warp (G % 32 <= 16, e.g. K3's 3584
// columns: 112 groups), lanes 16-31 take the next row's last groups instead
// of idling, and hand their q to lanes 0-15 by a shuffle: the same q, added
// by the same lane in the same place, so the same bits.
//
// E2M1 decode by a shared-memory table of bf16 pairs, one copy per lane (as
// lookup_bf16 in mxfp4.cu: a warp never has a bank conflict and one PRMT
// builds the address): PRMT, LDS.32, a shift and a mask, two FFMAs per code
// byte. The table uses the low 128 bytes of each 256-byte row; group g's
// activations sit in the high 128 bytes of row g (its eight 16-byte chunks
// XOR-swizzled by g mod 8, so the quarter-warp of a 16-byte read hits eight
// different bank groups): 64 KB of shared memory per block in all, so three
// 8-warp blocks fit an SM (`warp3`, at most 80 registers a thread) or two of
// 128 registers (`warp`); `warp_auto` (the default) picks one per launch. `warp_f2` / `warp_mix1` decode
// all / a quarter of the code words by a float2 table instead (Layout below):
// fewer integer instructions, twice the shared-memory bytes; measured slower /
// no faster (docs/decisions.md, "CUDA kernels").
//
// Loads: at two blocks an SM (`warp`, 128 registers) a warp's code words are
// a ring over its tiles (the next tile's round j is loaded as soon as this
// tile's round j is used), so the warp's loads never drain between tiles;
// at three (`warp3`, 80 registers) a tile's loads all go out at its start.
// Launched with programmatic dependent launch (common.cuh): the table fill
// and the first loads overlap the kernel before; activations are read after
// the wait. Gate and up share their activations: a block reloads them only
// when the pointer changes.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mxfp4_launch.cuh"

namespace sluice::cuda::detail {
namespace {

constexpr int kWarps = 8;       // per block
constexpr int kMaxGroups = 256;  // one table row per group: cols <= 8192

// Where a decode keeps its tables and activations. kF2 of the four code words
// of a group row are decoded by the float2 table, the others by the bf16-pair
// table (both exact: the same floats). kF2 = 0: bf16 pairs, 32 lane copies,
// the low 128 bytes of each 256-byte row; kF2 = 4: float2 entries, 16 lane
// copies (a 64-bit shared-memory access is served a half-warp at a time, so
// lanes l and l+16 may share a copy), the same place. Either way group g's
// activations fill the high 128 bytes of row g: 64 KB in all. Both tables
// (kF2 = 1..3): bf16 pairs in the low half, float2 in the high half of each
// row, the activations after the 64 KB at 128 bytes a group: 96 KB.
template <int kF2>
struct Layout {
  static constexpr bool kBoth = kF2 > 0 && kF2 < 4;
  static constexpr uint32_t kBf16 = 0, kFloat2 = kBoth ? 128 : 0;
  static constexpr uint32_t kX = kBoth ? 65536 : 128, kXRow = kBoth ? 128 : 256;
  static constexpr int kSmem = kBoth ? 65536 + 128 * kMaxGroups : 65536;
  // Byte offset of 16-byte chunk c (0-7) of group g's activations, XOR-
  // swizzled by g mod 8: a quarter-warp's 16-byte reads hit 8 bank groups.
  static __device__ __forceinline__ uint32_t x_row(uint32_t g) { return kX + kXRow * g; }
  static __device__ __forceinline__ uint32_t x_chunk(uint32_t g, uint32_t c) { return x_row(g) + 16u * (c ^ (g & 7u)); }
  // Word jw (0-3) of a group's 16 code bytes by the float2 table? Spread
  // evenly over the words.
  static __host__ __device__ constexpr bool f2_word(int jw) { return (jw * kF2) % 4 < kF2; }
  static __device__ void fill(char* smem) {
    for (int i = threadIdx.x; i < 256 * 32; i += blockDim.x) {
      const uint32_t b = uint32_t(i) >> 5, l = uint32_t(i) & 31u;
      if (kF2 < 4) reinterpret_cast<uint32_t*>(smem + 256u * b + kBf16)[l] = e2m1_bf16_pair(b);
      if (kF2 > 0 && l < 16) reinterpret_cast<float2*>(smem + 256u * b + kFloat2)[l] = e2m1_f2_pair(b);
    }
  }
};

// p for `rows` chains: the group's 32 columns, word by word, FMAs in column
// order. w[r] is row r's 16 code bytes, xrow the group's activation row
// (bits 4-6 clear), lx16 the lane's swizzle.
template <int kF2, int kN>
__device__ __forceinline__ void group_dot(const char* smem, uint32_t xrow, uint32_t lx16, uint32_t lane_bf16,
                                          uint32_t lane_f2, const uint4 (&w)[kN], float (&p)[kN]) {
  using Lay = Layout<kF2>;
#pragma unroll
  for (int r = 0; r < kN; r++) p[r] = 0.0f;
#pragma unroll
  for (int jw = 0; jw < 4; jw++) {
    const float4 a = *reinterpret_cast<const float4*>(smem + (xrow | ((uint32_t(2 * jw) << 4) ^ lx16)));
    const float4 b = *reinterpret_cast<const float4*>(smem + (xrow | ((uint32_t(2 * jw + 1) << 4) ^ lx16)));
    const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int r = 0; r < kN; r++) {
      const uint32_t word = jw == 0 ? w[r].x : jw == 1 ? w[r].y : jw == 2 ? w[r].z : w[r].w;
      float d[8];
      if (Lay::f2_word(jw))  // the loop is unrolled: resolved at compile time
        lut_decode<true>(smem, word, lane_f2, d);
      else
        lut_decode<false>(smem, word, lane_bf16, d);
#pragma unroll
      for (int i = 0; i < 8; i++) p[r] = __fmaf_rn(d[i], x[i], p[r]);
    }
  }
}

__device__ __forceinline__ float q_of(float p, uint32_t s) { return __fmul_rn(__fmul_rn(p, 16384.0f), e8m0(s)); }

// kNJ = ceil(G/32) rounds of groups per lane; kRows rows per warp (even);
// kPair: the last round is at most 16 groups, two rows share it; kF2: words
// per group decoded by the float2 table (Layout).
template <int kNJ, int kRows, bool kPair, int kBlocksPerSm, int kF2>
__global__ void __launch_bounds__(32 * kWarps, kBlocksPerSm) mxfp4_warp_kernel(const __grid_constant__ Launch L) {
  using Lay = Layout<kF2>;
  extern __shared__ float4 smem4[];
  char* smem = reinterpret_cast<char*>(smem4);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  const int G = L.cols / 32, half_cols = L.cols / 2;
  constexpr int kFull = kPair ? kNJ - 1 : kNJ;  // rounds every lane takes for its own row
  const int tile_rows = kWarps * kRows;
  const int tiles_per_task = (L.rows + tile_rows - 1) / tile_rows;
  const int total = L.ntasks * tiles_per_task;
  const int begin = int(int64_t(total) * blockIdx.x / gridDim.x), end = int(int64_t(total) * (blockIdx.x + 1) / gridDim.x);
  const uint32_t lane_bf16 = Lay::kBf16 + uint32_t(lane) * 4u, lane_f2 = Lay::kFloat2 + (uint32_t(lane) & 15u) * 8u;
  const uint32_t lx16 = (uint32_t(lane) & 7u) << 4;
  // The paired round: lane l takes row 2k + (l >= 16), group 32·kFull + l % 16.
  const int pg = 32 * kFull + (lane & 15), prow = lane >> 4, pg_clamped = min(pg, G - 1);
  // The last full-warp round's group, relative to the lane's first: lanes
  // past the last group read the last group (valid memory, never used).
  const int last_dg = min(lane + 32 * (kNJ - 1), G - 1) - lane;

  // The code words and scales of one tile, round by round (w[j], s[j]: round
  // j of every row). With kRing, once round j of a tile is used, round j of
  // the block's next tile is loaded into it, so a warp always has loads in
  // flight, across tiles and task changes too (measured: down 0.56 -> 0.62 of
  // HBM at two blocks an SM). Three blocks an SM leave 80 registers a
  // thread, too few for that (it spills): there a tile's loads all go out
  // at its start. Rows past the end read the last row again, lanes past the
  // last group its last group (valid memory, never used or stored).
  constexpr bool kRing = kBlocksPerSm * kWarps <= 16;  // 128 registers a thread or more
  uint4 w[kNJ][kRows];
  uint32_t s[kNJ][kRows];
  auto load_round = [&](int tile, int j) {
    const int ti = tile / tiles_per_task, row0 = (tile % tiles_per_task) * tile_rows + warp * kRows;
    const MxTask& T = L.task[ti];
    if (j < kFull) {
      // One address per row from the lane's first group on; the rounds are
      // constant offsets from it, the last, partial round's clamp a per-lane
      // constant.
      const int dg = j < kNJ - 1 ? 32 * j : last_dg;
#pragma unroll
      for (int r = 0; r < kRows; r++) {
        const uint32_t row = uint32_t(min(row0 + r, L.rows - 1));
        w[j][r] = ld_stream16(T.packed + 16 * lane + size_t(row) * uint32_t(half_cols) + 16 * dg);
        s[j][r] = ld_stream8(T.scale + lane + size_t(row) * uint32_t(G) + dg);
      }
    } else {  // the paired round (kPair, j = kNJ - 1)
#pragma unroll
      for (int k = 0; k < kRows / 2; k++) {
        const uint32_t row = uint32_t(min(row0 + 2 * k + prow, L.rows - 1));
        w[j][k] = ld_stream16(T.packed + size_t(row) * uint32_t(half_cols) + 16 * pg_clamped);
        s[j][k] = ld_stream8(T.scale + size_t(row) * uint32_t(G) + pg_clamped);
      }
    }
  };
  // With kRing the first tile's loads go out before the table fill and the
  // wait for the kernel before this one (weights never come from a kernel).
  if (kRing && begin < end) {
#pragma unroll
    for (int j = 0; j < kNJ; j++) load_round(begin, j);
  }
  let_next_kernel_start();
  Lay::fill(smem);

  const float* x_now = nullptr;  // whose activations are in shared memory (gate and up share theirs)
  for (int tile = begin; tile < end; tile++) {
    const int ti = tile / tiles_per_task, row0 = (tile % tiles_per_task) * tile_rows + warp * kRows;
    const MxTask& T = L.task[ti];
    const bool more = kRing && tile + 1 < end;
    if (T.X != x_now) {
      __syncthreads();  // every warp is done with the old activations (and the table is filled)
      if (x_now == nullptr) wait_for_previous_kernel();  // the activations may come from it
      for (int i = tid; i < L.cols / 4; i += blockDim.x) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(T.X) + i);
        *reinterpret_cast<float4*>(smem + Lay::x_chunk(uint32_t(i) / 8u, uint32_t(i) % 8u)) = f;
      }
      __syncthreads();
      x_now = T.X;
    }
    if (!kRing) {
#pragma unroll
      for (int j = 0; j < kNJ; j++) load_round(tile, j);
    }
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; r++) acc[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < kFull; j++) {
      const int g = lane + 32 * j;
      if (j < kNJ - 1 || g < G) {
        float p[kRows];
        group_dot<kF2, kRows>(smem, Lay::x_row(uint32_t(g)), lx16, lane_bf16, lane_f2, w[j], p);
#pragma unroll
        for (int r = 0; r < kRows; r++) acc[r] = __fadd_rn(acc[r], q_of(p[r], s[j][r]));
      }
      if (more) load_round(tile + 1, j);
    }
    if constexpr (kPair) {
      uint4 wp[kRows / 2];
      uint32_t sp[kRows / 2];
#pragma unroll
      for (int k = 0; k < kRows / 2; k++) wp[k] = w[kNJ - 1][k], sp[k] = s[kNJ - 1][k];
      float p[kRows / 2];
      group_dot<kF2, kRows / 2>(smem, Lay::x_row(uint32_t(min(pg, G - 1))), lx16, lane_bf16, lane_f2, wp, p);
      if (more) load_round(tile + 1, kNJ - 1);
#pragma unroll
      for (int k = 0; k < kRows / 2; k++) {
        const float q = q_of(p[k], sp[k]);
        const float q_next = __shfl_down_sync(0xffffffffu, q, 16);  // lane l+16's: row 2k+1, group pg
        if (lane < 16 && pg < G) {
          acc[2 * k] = __fadd_rn(acc[2 * k], q);
          acc[2 * k + 1] = __fadd_rn(acc[2 * k + 1], q_next);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; r++) {
      float sum = acc[r];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, off));
      if (lane == 0 && row0 + r < L.rows) T.Y[row0 + r] = sum;
    }
  }
}

template <int kNJ, int kRows, bool kPair, int kBlocksPerSm, int kF2>
void launch(const Launch& L, cudaStream_t stream) {
  const int threads = 32 * kWarps, kSmem = Layout<kF2>::kSmem;
  static thread_local Occupancy occ;
  launch_persistent(mxfp4_warp_kernel<kNJ, kRows, kPair, kBlocksPerSm, kF2>, occ, L, kWarps * kRows, threads,
                    size_t(kSmem), stream, "mxfp4 warp kernel launch", true);
}

template <int kNJ, int kBlocksPerSm, int kF2>
void launch_nj(const Launch& L, int rows, cudaStream_t stream) {
  const int last = L.cols / 32 - 32 * (kNJ - 1);  // groups in the last round, 1..32
  // R·kNJ code words per lane are in flight: 4 rows up to 4 rounds.
  if constexpr (kNJ <= 4) {
    if (rows >= 4) {
      if (last <= 16) return launch<kNJ, 4, true, kBlocksPerSm, kF2>(L, stream);
      return launch<kNJ, 4, false, kBlocksPerSm, kF2>(L, stream);
    }
  }
  if (last <= 16) return launch<kNJ, 2, true, kBlocksPerSm, kF2>(L, stream);
  launch<kNJ, 2, false, kBlocksPerSm, kF2>(L, stream);
}

template <int kBlocksPerSm, int kF2>
void launch_blocks(const Launch& L, int rows, cudaStream_t stream) {
  switch ((L.cols / 32 + 31) / 32) {
    case 1: return launch_nj<1, kBlocksPerSm, kF2>(L, rows, stream);
    case 2: return launch_nj<2, kBlocksPerSm, kF2>(L, rows, stream);
    case 3: return launch_nj<3, kBlocksPerSm, kF2>(L, rows, stream);
    case 4: return launch_nj<4, kBlocksPerSm, kF2>(L, rows, stream);
    case 5: return launch_nj<5, kBlocksPerSm, kF2>(L, rows, stream);
    case 6: return launch_nj<6, kBlocksPerSm, kF2>(L, rows, stream);
    default: return launch_nj<7, kBlocksPerSm, kF2>(L, rows, stream);
  }
}

}  // namespace

bool launch_warp(const Launch& L, Mxfp4Tuning t, cudaStream_t stream) {
  static_assert(kMaxCols / 32 <= kMaxGroups, "one table row per group");
  if (t.decode == Mxfp4Decode::warp_auto) {
    // Blocks take whole tiles, so the slowest does ceil(tiles / blocks) of
    // them: three blocks an SM (24 warps, ~4 % faster per tile) unless two
    // split the tiles more than 5 % more evenly.
    const int rows_per_warp = (L.cols / 32 + 31) / 32 <= 4 && t.rows_per_thread >= 4 ? 4 : 2;  // as launch_nj
    const int64_t tiles = int64_t(L.ntasks) * ((L.rows + kWarps * rows_per_warp - 1) / (kWarps * rows_per_warp));
    const int sms = sm_count();
    auto balance = [&](int64_t blocks) {
      blocks = std::min(blocks, tiles);
      return double(tiles) / double(blocks * ((tiles + blocks - 1) / blocks));
    };
    if (tiles > 0 && balance(2 * sms) > balance(3 * sms) + 0.05)
      return launch_blocks<2, 0>(L, t.rows_per_thread, stream), true;
    return launch_blocks<3, 0>(L, t.rows_per_thread, stream), true;
  }
  if (t.decode == Mxfp4Decode::warp) return launch_blocks<2, 0>(L, t.rows_per_thread, stream), true;
  if (t.decode == Mxfp4Decode::warp3) return launch_blocks<3, 0>(L, t.rows_per_thread, stream), true;
  if (t.decode == Mxfp4Decode::warp1) return launch_blocks<1, 0>(L, t.rows_per_thread, stream), true;
  if (t.decode == Mxfp4Decode::warp_f2) return launch_blocks<2, 4>(L, t.rows_per_thread, stream), true;
  if (t.decode == Mxfp4Decode::warp_mix1) return launch_blocks<2, 1>(L, t.rows_per_thread, stream), true;
  return false;
}

}  // namespace sluice::cuda::detail
