// kernels/cuda/mxfp4_mma.cu — the MXFP4 GEMV on tensor cores (decode tunings
// `mma` and `mma3`, and their prefill): exact products, summed in FP32 by the
// tensor core. Its own family of bits (cuda.h): not the FMA chain of the
// other kernels, within 1e-5·Σ|w·x| of ref like them, and bitwise within
// itself (matmul(X)[t] == matvec(X[t]), grouped == one by one).
//
// Why the products are exact: an E2M1 value · 2^-2 · 2^(s-127) is exact in
// bf16 for every scale s = 0..254 (at most two significant bits, 2^-130 up to
// 1.5·2^127; the smallest are bf16 subnormals), and an fp32 x is exactly
// x_hi + x_mid + x_lo, three bf16 parts (truncate, subtract exactly, twice).
// So one bf16 mma m16n8k16 with the parts of x as B's columns 0-2 (a second
// token's as columns 3-5) multiplies exactly; y = 4·((D0 + D1) + D2).
// Columns of an mma are independent bit for bit (measured: bench/
// mxfp4_mma_probe.cu, and the tests compare one token against two), so a
// token's bits do not depend on its pass.
//
// Work: a warp takes 16·kRB rows of one task (a tile of the block: 8 warps),
// all groups. Step st covers groups 4st..4st+3: lane (gq = lane/4, c =
// lane%4) loads group 4st+c of rows gq and gq+8 (16 bytes each, one load),
// so a step is a warp's 1 KB per 16 rows. The mma's k-slots of lane c are
// that group's codes (slot pair c: byte 2i, slot pair c+4: byte 2i+1 of mma
// i), and B's rows the same columns of x, read from shared memory where a
// task's activations are split once into their bf16 parts. Per code byte:
// PRMT (table address), LDS (the bf16 pair of the byte's two codes), HFMA2
// (times the group's scale, exact) and a quarter of an mma: half the
// instructions of the warp kernel's FMA chain on paper; measured, the
// addresses and register moves around them bring a step back to as many, and
// it runs at 0.55 of HBM against warp_auto's 0.65 (docs/decisions.md, "CUDA
// kernels"): a tuning, not the default.
//
// Loads: a ring of kK1 steps over the block's tiles and token passes (the
// next tile's first steps go out during this one's last), programmatic
// dependent launch as the warp kernel (table fill and first loads before the
// wait). Shapes: cols % 512 == 0 and cols <= 5120 (K3's 3072 and 3584);
// others take the warp kernel's path (another family: bits depend on cols).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mxfp4_launch.cuh"

namespace sluice::cuda::detail {
namespace {

constexpr int kWarps = 8;
constexpr int kTableBytes = 65536;  // 256 code bytes × 256-byte rows: the table in the low halves

// A 16-byte chunk's place in shared memory. Token 0's parts live in the high
// halves of the table's rows (phys), token 1's after the table. Within a
// token, group j of parts 0 and 1 fills 128 bytes at 128·j (part 0 low, part
// 1 high) and part 2 has 64 bytes at 128·G + 64·j; chunk q of a group-part
// sits at chunk (q + j) mod 4, so the 8 lanes of a quarter-warp read 8
// different bank groups.
__device__ __forceinline__ uint32_t phys(uint32_t o) { return ((o >> 7) << 8) + 128u + (o & 127u); }
__device__ __forceinline__ uint32_t x_linear(int G, int p, int j, int q) {
  const uint32_t chunk = 16u * uint32_t((q + j) & 3);
  return p < 2 ? 128u * j + 64u * p + chunk : 128u * G + 64u * j + chunk;
}
__device__ __forceinline__ uint32_t x_addr(int G, int t, int p, int j, int q) {
  const uint32_t o = x_linear(G, p, j, q);
  return t == 0 ? phys(o) : uint32_t(kTableBytes) + o;
}

// Where one warp's rows of a tile are: lane (gq, c)'s group-c pointers for
// rows gq and gq + 8 of each 16-row block (rows past the end read the last
// row: valid memory, never stored).
template <int kRB>
struct TileRows {
  const uint8_t* pk[kRB];
  const uint8_t* sc[kRB];
  uint32_t dpk[kRB], dsc[kRB];  // row gq+8 minus row gq
};

template <int kRB, int kK1, int kTok, int kBlocksPerSm>
__global__ void __launch_bounds__(32 * kWarps, kBlocksPerSm) mxfp4_mma_kernel(const __grid_constant__ Launch L) {
  extern __shared__ float4 smem4[];
  char* smem = reinterpret_cast<char*>(smem4);
  constexpr int kAhead = kK1 - 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, c = lane & 3;
  const int G = L.cols / 32, S = G / 4, half_cols = L.cols / 2, rows = L.rows;
  const int tile_rows = kWarps * 16 * kRB;
  const int tiles_per_task = (rows + tile_rows - 1) / tile_rows;
  const int total = L.ntasks * tiles_per_task;
  const int begin = int(int64_t(total) * blockIdx.x / gridDim.x),
            end = int(int64_t(total) * (blockIdx.x + 1) / gridDim.x);
  const uint32_t lane_off = 4u * uint32_t(lane);

  auto rows_of = [&](int tile, TileRows<kRB>& R) {
    const MxTask& T = L.task[tile / tiles_per_task];
    const int row0 = (tile % tiles_per_task) * tile_rows + warp * 16 * kRB;
#pragma unroll
    for (int b = 0; b < kRB; b++) {
      const int r0 = min(row0 + 16 * b + gq, rows - 1), r8 = min(row0 + 16 * b + gq + 8, rows - 1);
      R.pk[b] = T.packed + size_t(r0) * uint32_t(half_cols) + 16 * c;
      R.sc[b] = T.scale + size_t(r0) * uint32_t(G) + c;
      R.dpk[b] = uint32_t(r8 - r0) * uint32_t(half_cols);
      R.dsc[b] = uint32_t(r8 - r0) * uint32_t(G);
    }
  };
  uint4 w[kK1][kRB][2];
  uint32_t s[kK1][kRB][2];
  auto load = [&](const TileRows<kRB>& R, int st, int slot) {
#pragma unroll
    for (int b = 0; b < kRB; b++) {
      w[slot][b][0] = ld_stream16(R.pk[b] + 64 * st);
      w[slot][b][1] = ld_stream16(R.pk[b] + R.dpk[b] + 64 * st);
      s[slot][b][0] = ld_stream8(R.sc[b] + 4 * st);
      s[slot][b][1] = ld_stream8(R.sc[b] + R.dsc[b] + 4 * st);
    }
  };

  TileRows<kRB> cur, nxt;
  if (begin < end) {
    rows_of(begin, cur);
#pragma unroll
    for (int j = 0; j < kAhead; j++) load(cur, j, j);
  }
  let_next_kernel_start();
  for (int i = tid; i < 256 * 32; i += blockDim.x) {  // bf16 pairs of a code byte, a copy per lane
    const uint32_t b = uint32_t(i) >> 5, l = uint32_t(i) & 31u;
    reinterpret_cast<uint32_t*>(smem + 256u * b)[l] = e2m1_quarter_pair(b);
  }

  // This lane's B rows: token bt, part bp of x (lanes past the parts hold 0).
  const int bt = gq / 3, bp = gq % 3;
  const bool b_active = gq < 3 * kTok;
  uint32_t xq[4];  // chunk q of group c of step 0; step st adds st·xstep
#pragma unroll
  for (int q = 0; q < 4; q++) xq[q] = b_active ? x_addr(G, bt, bp, c, q) : 0u;
  const uint32_t xstep = bt == 0 ? (bp < 2 ? 1024u : 512u) : (bp < 2 ? 512u : 256u);

  const float* x_now = nullptr;
  int x_tok = -1;
  int tok0 = 0;
  for (int tile = begin; tile < end;) {
    const MxTask& T = L.task[tile / tiles_per_task];
    const int row0 = (tile % tiles_per_task) * tile_rows + warp * 16 * kRB;
    const int nt = min(kTok, T.n - tok0);  // tokens in this pass
    const bool next_pass = tok0 + kTok < T.n;
    const bool has_next = next_pass || tile + 1 < end;
    if (next_pass)
      nxt = cur;
    else if (tile + 1 < end)
      rows_of(tile + 1, nxt);
    if (T.X != x_now || tok0 != x_tok) {
      __syncthreads();  // every warp is done with the old parts (and the table is filled)
      if (x_now == nullptr) wait_for_previous_kernel();  // the activations may come from it
      for (int i = tid; i < kTok * L.cols / 8; i += blockDim.x) {
        const int t = i / (L.cols / 8), col = 8 * (i % (L.cols / 8));
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b = a;
        if (t < nt) {
          const float4* src = reinterpret_cast<const float4*>(T.X + size_t(tok0 + t) * L.cols + col);
          a = __ldg(src), b = __ldg(src + 1);
        }
        const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        uint32_t part[3][4];
        split3_pairs(v, part);
        const int j = col / 32, q = (col % 32) / 8;
#pragma unroll
        for (int p = 0; p < 3; p++)
          *reinterpret_cast<uint4*>(smem + x_addr(G, t, p, j, q)) =
              make_uint4(part[p][0], part[p][1], part[p][2], part[p][3]);
      }
      __syncthreads();
      x_now = T.X, x_tok = tok0;
    }

    float d[kRB][4];
#pragma unroll
    for (int b = 0; b < kRB; b++) d[b][0] = d[b][1] = d[b][2] = d[b][3] = 0.0f;
    for (int st0 = 0; st0 < S; st0 += kK1) {
#pragma unroll
      for (int j = 0; j < kK1; j++) {
        const int st = st0 + j;
        const int pf = st + kAhead;
        if (pf < S)
          load(cur, pf, (j + kAhead) % kK1);
        else if (has_next)
          load(nxt, pf - S, (j + kAhead) % kK1);
        uint32_t xb[16];
#pragma unroll
        for (int q = 0; q < 4; q++) {
          uint4 v = make_uint4(0, 0, 0, 0);
          if (b_active) v = *reinterpret_cast<const uint4*>(smem + xq[q] + uint32_t(st) * xstep);
          xb[4 * q] = v.x, xb[4 * q + 1] = v.y, xb[4 * q + 2] = v.z, xb[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int b = 0; b < kRB; b++) {
          uint32_t sp[2];
#pragma unroll
          for (int h = 0; h < 2; h++) {
            sp[h] = e8m0_bf16_pair(s[j][b][h]);
          }
          const uint32_t wa[4] = {w[j][b][0].x, w[j][b][0].y, w[j][b][0].z, w[j][b][0].w};
          const uint32_t wb[4] = {w[j][b][1].x, w[j][b][1].y, w[j][b][1].z, w[j][b][1].w};
#pragma unroll
          for (int i = 0; i < 8; i++) {
            const uint32_t sel0 = 0x5504u | (uint32_t((2 * i) & 3) << 4),
                           sel1 = 0x5504u | (uint32_t((2 * i + 1) & 3) << 4);
            const uint32_t a0 =
                bmul2(*reinterpret_cast<const uint32_t*>(smem + __byte_perm(wa[i / 2], lane_off, sel0)), sp[0]);
            const uint32_t a1 =
                bmul2(*reinterpret_cast<const uint32_t*>(smem + __byte_perm(wb[i / 2], lane_off, sel0)), sp[1]);
            const uint32_t a2 =
                bmul2(*reinterpret_cast<const uint32_t*>(smem + __byte_perm(wa[i / 2], lane_off, sel1)), sp[0]);
            const uint32_t a3 =
                bmul2(*reinterpret_cast<const uint32_t*>(smem + __byte_perm(wb[i / 2], lane_off, sel1)), sp[1]);
            mma16816(d[b], a0, a1, a2, a3, xb[2 * i], xb[2 * i + 1]);
          }
        }
      }
    }

    // Column n of row gq is lane 4·gq + n/2's d[n % 2] (row gq + 8: d[2 + n % 2]).
#pragma unroll
    for (int b = 0; b < kRB; b++) {
      float e[4];
#pragma unroll
      for (int i = 0; i < 4; i++) e[i] = __shfl_down_sync(0xffffffffu, d[b][i], 1);
      const int r = row0 + 16 * b + gq;
      if (c == 0) {  // token 0: (D0 + D1) + D2
        if (r < rows) T.Y[size_t(tok0) * rows + r] = __fmul_rn(__fadd_rn(__fadd_rn(d[b][0], d[b][1]), e[0]), 4.0f);
        if (r + 8 < rows)
          T.Y[size_t(tok0) * rows + r + 8] = __fmul_rn(__fadd_rn(__fadd_rn(d[b][2], d[b][3]), e[2]), 4.0f);
      }
      if (kTok == 2 && c == 1 && nt == 2) {  // token 1: (D3 + D4) + D5
        if (r < rows) T.Y[size_t(tok0 + 1) * rows + r] = __fmul_rn(__fadd_rn(__fadd_rn(d[b][1], e[0]), e[1]), 4.0f);
        if (r + 8 < rows)
          T.Y[size_t(tok0 + 1) * rows + r + 8] = __fmul_rn(__fadd_rn(__fadd_rn(d[b][3], e[2]), e[3]), 4.0f);
      }
    }
    if (next_pass) {
      tok0 += kTok;
    } else {
      tile++, tok0 = 0;
      cur = nxt;
    }
  }
}

template <int kRB, int kK1, int kTok, int kBlocksPerSm>
void launch(const Launch& L, cudaStream_t stream) {
  const int G = L.cols / 32;
  const size_t smem = size_t(kTableBytes) + (kTok == 2 ? size_t(192) * G : 0);
  static thread_local Occupancy occ;
  launch_persistent(mxfp4_mma_kernel<kRB, kK1, kTok, kBlocksPerSm>, occ, L, kWarps * 16 * kRB, 32 * kWarps, smem,
                    stream, "mxfp4 mma kernel launch", true);
}

template <int kTok>
void launch_tok(const Launch& L, Mxfp4Tuning t, cudaStream_t stream) {
  // Registers (no spills): 16 rows a warp with a ring of 4 steps at two
  // blocks an SM (~120) or of 2 at three (~72); 32 rows with a ring of 2 at
  // two.
  if (t.decode == Mxfp4Decode::mma3) return launch<1, 2, kTok, 3>(L, stream);
  if (t.rows_per_thread == 2) return launch<2, 2, kTok, 2>(L, stream);
  launch<1, 4, kTok, 2>(L, stream);
}

}  // namespace

// Whole steps of 4 groups in a ring of 2 or 4 steps; token 0's parts in 32 KB.
bool mma_takes(int cols) {
  return cols % 512 == 0 && cols <= 5120;
}

bool launch_mma(const Launch& L, int tokens_per_pass, Mxfp4Tuning t, cudaStream_t stream) {
  if (!mma_takes(L.cols)) return false;
  if (tokens_per_pass == 1)
    launch_tok<1>(L, t, stream);
  else
    launch_tok<2>(L, t, stream);
  return true;
}

}  // namespace sluice::cuda::detail
