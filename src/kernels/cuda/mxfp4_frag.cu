// kernels/cuda/mxfp4_frag.cu — MXFP4 GEMV/GEMM over matrices re-laid once in
// VRAM in "fragment order", on tensor cores: the engine's expert kernel at
// the widths it takes (cuda.h: mxfp4_frag_takes).
//
// The layout. The same bytes as the checkpoint's [rows][cols/2] codes and
// [rows][cols/32] scales, permuted (rows padded to a multiple of 32 with zero
// codes): row block rb (16 rows) and step t (groups 4t..4t+3, 128 columns)
// make a 1 KB unit at (rb·S + t)·1024, S = cols/128, where byte h·512 + 16l + i
// is code byte 16(4t + l%4) + i of row 16rb + 8h + l/4; its scales are 64
// bytes at (rb·S + t)·64, byte 2l + h the scale of that row and group. So a
// warp's step is 1 KB of contiguous codes (lane l loads the 16 bytes at 16l
// and at 512 + 16l, its scales as one 2-byte load): one pointer a warp, no
// per-row addresses, no bounds in the loop. The copy is made when the bytes
// enter VRAM (backend_cuda.cu): the tier, a mirror, or a call's upload.
//
// The products (as mxfp4_mma.cu): lane (gq = l/4, c = l%4) holds group 4t + c
// of rows gq and gq + 8, which are its k-slots in the step's 8 mmas
// (m16n8k16: slot pair c is byte 2i of mma i, pair c + 4 byte 2i + 1); A is
// a table's bf16 pair (value·2^-2 of both codes of a byte) times the group's
// scale 2^(s-127) (HFMA2, exact for every s); B's columns 0-2 are the three
// bf16 parts of x (x = hi + mid + lo exactly) at the same columns. Products
// are exact; the tensor core sums them in FP32, its own order.
//
// The work. A unit of work is 32 rows (two row blocks) of one token of one
// task. A block (8 warps, two an SM) takes a contiguous range of units;
// warp w takes steps w, w + 8, ... of each, two steps' loads in flight ahead
// of the one it computes (a ring of registers across units). The split of a
// row's steps over the 8 warps is fixed by cols, so the bits do not depend
// on the grid, the tokens or the other tasks. At a unit's end the warps'
// sums meet in shared memory: buffer `slot` (the block's unit count mod 8),
// barrier 1 + slot; warp `slot` waits there and adds, for each row and part,
// the 8 warps' sums in warp order, then y = 4·((P0 + P1) + P2); the other
// warps arrive and go on. A warp waits once in every 8 units, so none can
// refill a buffer before its reader has read it. Tokens of a task are units
// in turn (a token re-reads the weights: prefill does 4 flops a code byte
// at this kernel's bandwidth). Measured: docs/kernels-cuda.md, "Design" and "Measured".
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mxfp4_launch.cuh"

namespace sluice::cuda {
namespace {
using namespace detail;

constexpr int kWarps = 8, kRowBlocks = 2, kUnitRows = 16 * kRowBlocks, kAhead = 2;
constexpr int kTableBytes = 65536;  // 256 code bytes × 256-byte rows, a copy per lane in the low 128 bytes
constexpr int kMinSteps = kWarps;   // every warp has a step of every unit

__host__ __device__ constexpr int steps_of(int cols) { return cols / 128; }
__host__ __device__ constexpr int units_of(int rows) { return (rows + kUnitRows - 1) / kUnitRows; }
__host__ __device__ constexpr size_t x_bytes(int cols) { return size_t(768) * steps_of(cols); }
constexpr size_t kPartBytes = size_t(kWarps) * kWarps * 3 * kUnitRows * sizeof(float);
size_t smem_bytes(int cols) { return kTableBytes + x_bytes(cols) + kPartBytes; }

// Where a walk through the launch's units is: task, token, unit of rows.
struct Cursor {
  int task, tok, ut;
};
__device__ __forceinline__ void advance(Cursor& k, const Launch& L, int UT) {
  if (++k.ut == UT) {
    k.ut = 0;
    if (++k.tok == L.task[k.task].n) k.tok = 0, k.task++;
  }
}
__device__ __forceinline__ Cursor cursor_at(const Launch& L, int UT, int u) {
  Cursor k{0, 0, 0};
  while (k.task < L.ntasks && u >= L.task[k.task].n * UT) u -= L.task[k.task].n * UT, k.task++;
  k.tok = u / UT, k.ut = u % UT;
  return k;
}

__global__ void __launch_bounds__(32 * kWarps, 2) frag_kernel(const __grid_constant__ Launch L) {
  extern __shared__ uint4 smem4[];
  char* smem = reinterpret_cast<char*>(smem4);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, c = lane & 3;
  const int S = steps_of(L.cols), UT = units_of(L.rows);
  int U = 0;
  for (int i = 0; i < L.ntasks; i++) U += L.task[i].n * UT;
  const int ub = int(int64_t(U) * blockIdx.x / gridDim.x), ue = int(int64_t(U) * (blockIdx.x + 1) / gridDim.x);
  const int cnt = (S - warp + kWarps - 1) / kWarps;  // this warp's steps of a unit
  const int N = (ue - ub) * cnt;
  char* const xs = smem + kTableBytes;                          // x's parts: [t][q][part][c], 16-byte chunks
  float* const part = reinterpret_cast<float*>(xs + x_bytes(L.cols));  // [slot][warp][part][row]
  const size_t rb_codes = size_t(S) * 1024;                     // one row block's codes (its scales: /16)

  // The load ring: w/s[j] hold the step computed at j mod kK1.
  constexpr int kK1 = kAhead + 1;
  uint4 w[kK1][kRowBlocks][2];
  uint32_t s[kK1][kRowBlocks];
  Cursor lc = cursor_at(L, UT, ub);
  int lu = ub, lk = 0;
  const uint8_t *lp = nullptr, *ls = nullptr;
  auto aim = [&]() {
    const size_t unit = size_t(lc.ut) * kRowBlocks * S + warp;
    lp = L.task[lc.task].packed + unit * 1024 + 16 * lane, ls = L.task[lc.task].scale + unit * 64 + 2 * lane;
  };
  if (lu < ue) aim();
  auto load = [&](int slot) {
    if (lu >= ue) return;
#pragma unroll
    for (int b = 0; b < kRowBlocks; b++) {
      w[slot][b][0] = ld_stream16(lp + b * rb_codes), w[slot][b][1] = ld_stream16(lp + b * rb_codes + 512);
      s[slot][b] = ld_stream16bit(ls + b * (rb_codes / 16));
    }
    lp += 1024 * kWarps, ls += 64 * kWarps;
    if (++lk == cnt) {
      lk = 0;
      advance(lc, L, UT);
      if (++lu < ue) aim();
    }
  };
#pragma unroll
  for (int j = 0; j < kAhead; j++) load(j);
  let_next_kernel_start();
  for (int b = tid; b < 256; b += blockDim.x) {
    const uint32_t e = e2m1_quarter_pair(uint32_t(b));
#pragma unroll
    for (int q = 0; q < 8; q++) reinterpret_cast<uint4*>(smem + 256 * b)[q] = make_uint4(e, e, e, e);
  }
  wait_for_previous_kernel();  // activations may come from it; outputs may be read by it

  // x's three bf16 parts, chunk q (8 columns) of group 4t + c of part p at
  // 16-byte chunk ((4t + q)·3 + p)·4 + c: a step's B reads are 12 lanes'
  // consecutive chunks.
  auto fill_x = [&](const float* X) {
    for (int i = tid; i < L.cols / 8; i += blockDim.x) {
      const float4 a = reinterpret_cast<const float4*>(X)[2 * i], b = reinterpret_cast<const float4*>(X)[2 * i + 1];
      const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      uint32_t pr[3][4];
      split3_pairs(v, pr);
      const int j = i / 4, q = i % 4, t = j / 4, jc = j % 4;
#pragma unroll
      for (int p = 0; p < 3; p++)
        *reinterpret_cast<uint4*>(xs + 16 * (((4 * t + q) * 3 + p) * 4 + jc)) =
            make_uint4(pr[p][0], pr[p][1], pr[p][2], pr[p][3]);
    }
  };
  Cursor cc = cursor_at(L, UT, ub);
  const float* xnow = nullptr;
  if (ub < ue) fill_x(xnow = L.task[cc.task].X + size_t(cc.tok) * L.cols);
  __syncthreads();

  const char* const xl = xs + 64 * gq + 16 * c;
  const bool b_active = gq < 3;  // B's columns 0-2; the other lanes' B is 0
  const uint32_t lane_off = 4u * lane;
  int cu = ub, ck = 0, slot = 0;
  float d[kRowBlocks][4];
#pragma unroll
  for (int b = 0; b < kRowBlocks; b++) d[b][0] = d[b][1] = d[b][2] = d[b][3] = 0.0f;
  for (int i0 = 0; i0 < N; i0 += kK1) {
#pragma unroll
    for (int j = 0; j < kK1; j++) {
      if (i0 + j >= N) break;
      load((j + kAhead) % kK1);
      const int t = warp + kWarps * ck;
      uint32_t xb[16];
#pragma unroll
      for (int q = 0; q < 4; q++) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (b_active) v = *reinterpret_cast<const uint4*>(xl + 768 * t + 192 * q);
        xb[4 * q] = v.x, xb[4 * q + 1] = v.y, xb[4 * q + 2] = v.z, xb[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int b = 0; b < kRowBlocks; b++) {
        const uint32_t sp0 = e8m0_bf16_pair(s[j][b] & 255u), sp1 = e8m0_bf16_pair(s[j][b] >> 8);
        const uint32_t wa[4] = {w[j][b][0].x, w[j][b][0].y, w[j][b][0].z, w[j][b][0].w};
        const uint32_t wb[4] = {w[j][b][1].x, w[j][b][1].y, w[j][b][1].z, w[j][b][1].w};
#pragma unroll
        for (int i = 0; i < 8; i++) {
          const uint32_t sel0 = 0x5504u | (uint32_t((2 * i) & 3) << 4), sel1 = 0x5504u | (uint32_t((2 * i + 1) & 3) << 4);
          auto entry = [&](uint32_t word, uint32_t sel) {
            return *reinterpret_cast<const uint32_t*>(smem + __byte_perm(word, lane_off, sel));
          };
          mma16816(d[b], bmul2(entry(wa[i / 2], sel0), sp0), bmul2(entry(wb[i / 2], sel0), sp1),
                   bmul2(entry(wa[i / 2], sel1), sp0), bmul2(entry(wb[i / 2], sel1), sp1), xb[2 * i], xb[2 * i + 1]);
        }
      }
      if (++ck < cnt) continue;
      // The end of this warp's share of unit cu: its sums into buffer slot.
      ck = 0;
      float* pb = part + slot * (kWarps * 3 * kUnitRows);
      float* mine = pb + warp * 3 * kUnitRows;
#pragma unroll
      for (int b = 0; b < kRowBlocks; b++) {  // column n of row gq is lane 4gq + n/2's d[n % 2] (row gq + 8: d[2 + n % 2])
        const int r = 16 * b + gq;
        if (c == 0) {
          mine[r] = d[b][0], mine[kUnitRows + r] = d[b][1];
          mine[r + 8] = d[b][2], mine[kUnitRows + r + 8] = d[b][3];
        } else if (c == 1) {
          mine[2 * kUnitRows + r] = d[b][0], mine[2 * kUnitRows + r + 8] = d[b][2];
        }
        d[b][0] = d[b][1] = d[b][2] = d[b][3] = 0.0f;
      }
      if (warp == slot) {
        asm volatile("bar.sync %0, %1;" ::"r"(1 + slot), "r"(32 * kWarps) : "memory");
        const int row = cc.ut * kUnitRows + lane;
        if (row < L.rows) {
          float acc[3];
#pragma unroll
          for (int p = 0; p < 3; p++) {
            acc[p] = pb[p * kUnitRows + lane];
#pragma unroll
            for (int ww = 1; ww < kWarps; ww++) acc[p] = __fadd_rn(acc[p], pb[(ww * 3 + p) * kUnitRows + lane]);
          }
          L.task[cc.task].Y[size_t(cc.tok) * L.rows + row] =
              __fmul_rn(__fadd_rn(__fadd_rn(acc[0], acc[1]), acc[2]), 4.0f);
        }
      } else {
        asm volatile("bar.arrive %0, %1;" ::"r"(1 + slot), "r"(32 * kWarps) : "memory");
      }
      if (++slot == kWarps) slot = 0;
      advance(cc, L, UT);
      if (++cu < ue) {
        const float* x = L.task[cc.task].X + size_t(cc.tok) * L.cols;
        if (x != xnow) {
          __syncthreads();  // every warp is past its last read of the old parts
          fill_x(xnow = x);
          __syncthreads();
        }
      }
    }
  }
}

// The permutations into fragment order (the header): one thread per 16-byte
// chunk of codes, one per scale byte; rows past the end get zero codes.
__device__ __forceinline__ void frag_source(size_t k, int G, size_t& row, int& grp) {
  const size_t u = k / 64;
  const int within = int(k % 64), S = G / 4, h = within / 32, l = within % 32;
  row = 16 * (u / S) + 8 * h + l / 4, grp = 4 * int(u % S) + l % 4;
}
__global__ void frag_packed_kernel(const uint8_t* packed, int rows, int cols, uint8_t* out, size_t chunks) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= chunks) return;
  const int G = cols / 32;
  size_t row;
  int grp;
  frag_source(k, G, row, grp);
  uint4 v = make_uint4(0, 0, 0, 0);
  if (row < size_t(rows)) v = reinterpret_cast<const uint4*>(packed + row * size_t(cols / 2))[grp];
  reinterpret_cast<uint4*>(out)[k] = v;
}
__global__ void frag_scale_kernel(const uint8_t* scale, int rows, int cols, uint8_t* out, size_t bytes) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= bytes) return;
  const int G = cols / 32;
  // Scale byte 2l + h of a unit is chunk 32h + l's.
  const size_t within = k % 64;
  size_t row;
  int grp;
  frag_source(k - within + (within % 2) * 32 + within / 2, G, row, grp);
  out[k] = row < size_t(rows) ? scale[row * size_t(G) + grp] : uint8_t(127);
}

void check_frag_shape(int rows, int cols) {
  if (!mxfp4_frag_takes(rows, cols))
    throw std::invalid_argument("cuda: mxfp4 fragment order: unsupported shape " + std::to_string(rows) + "x" +
                                std::to_string(cols));
}

}  // namespace

bool mxfp4_frag_takes(int rows, int cols) {
  return rows > 0 && cols % 128 == 0 && steps_of(cols) >= kMinSteps && cols <= kMaxCols;
}
size_t mxfp4_frag_packed_bytes(int rows, int cols) {
  return size_t(units_of(rows)) * kUnitRows * size_t(cols / 2);
}
size_t mxfp4_frag_scale_bytes(int rows, int cols) {
  return size_t(units_of(rows)) * kUnitRows * size_t(cols / 32);
}

void mxfp4_frag_packed(const uint8_t* packed, int rows, int cols, uint8_t* frag, void* stream) {
  check_frag_shape(rows, cols);
  const size_t chunks = mxfp4_frag_packed_bytes(rows, cols) / 16;
  frag_packed_kernel<<<unsigned((chunks + 255) / 256), 256, 0, as_stream(stream)>>>(packed, rows, cols, frag, chunks);
  check_launch("mxfp4 fragment order (codes)");
}
void mxfp4_frag_scale(const uint8_t* scale, int rows, int cols, uint8_t* frag, void* stream) {
  check_frag_shape(rows, cols);
  const size_t bytes = mxfp4_frag_scale_bytes(rows, cols);
  frag_scale_kernel<<<unsigned((bytes + 255) / 256), 256, 0, as_stream(stream)>>>(scale, rows, cols, frag, bytes);
  check_launch("mxfp4 fragment order (scales)");
}

void grouped_mxfp4_frag(const MxTask* tasks, int ntasks, int rows, int cols, void* stream) {
  if (ntasks > 0) check_frag_shape(rows, cols);
  for_each_launch(tasks, ntasks, rows, cols, [&](Launch& L, int) {
    int64_t units = 0;
    for (int i = 0; i < L.ntasks; i++) {
      units += int64_t(L.task[i].n) * units_of(rows);
      if (reinterpret_cast<uintptr_t>(L.task[i].scale) % 16 != 0)
        throw std::invalid_argument("cuda: mxfp4 fragment order: scales must be 16-byte aligned");
    }
    if (units > int64_t(1) << 30) throw std::invalid_argument("cuda: mxfp4 fragment order: too many tokens in one call");
    const size_t smem = smem_bytes(cols);
    static thread_local Occupancy occ;
    int dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    if (dev != occ.dev || smem != occ.smem) {
      check(cudaFuncSetAttribute(frag_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), "smem attribute");
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ.per_sm, frag_kernel, 32 * kWarps, smem), "occupancy");
      occ.sms = sm_count(), occ.dev = dev, occ.threads = 32 * kWarps, occ.smem = smem;
    }
    const int blocks = int(std::min<int64_t>(units, int64_t(std::max(occ.per_sm, 1)) * occ.sms));
    g_last = {blocks, 32 * kWarps, occ.per_sm, smem};
    launch_pdl(frag_kernel, dim3(blocks), dim3(32 * kWarps), smem, as_stream(stream), "mxfp4 fragment-order launch", L);
  });
}

}  // namespace sluice::cuda
