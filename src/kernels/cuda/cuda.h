// kernels/cuda/cuda.h — the CUDA kernels: the same contracts as kernels/ref.h,
// on device memory.
//
// Every pointer below is a device pointer (cudaMalloc) unless it says "host";
// every call is asynchronous on `stream` (nullptr: the legacy default stream)
// and throws std::runtime_error ("cuda: <what>: <CUDA error>") when the
// launch fails, std::invalid_argument on a shape the kernel cannot take.
// Nothing here allocates device memory or synchronizes.
//
// Exactness: FP32 accumulation in an order that depends only on `cols`
// (docs/kernels-cuda.md): never on the stream, the launch shape,
// the number of tokens or the other tasks of a grouped call. So
// matmul(X)[t] is bitwise matvec(X[t]), a grouped call is bitwise the same
// calls made one by one, and the results differ from ref:: only by summation
// order (|cuda - ref| <= 1e-5·Σ|w·x|).
//
// These are the bodies of the CUDA entry of the arithmetic backend's op table
// (kernels/backend.h); cuda.h itself knows nothing of the model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::cuda {

// Devices this process can use (0 without a driver or a GPU; never throws).
int device_count();
// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" for the current device.
const char* device_name();

// ---- bf16 weights, [rows][cols] row-major -------------------------------
void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y, void* stream = nullptr);
// Y[t] = W X[t] for t < n; X is [n][cols], Y is [n][rows].
void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y,
                 void* stream = nullptr);
// Programmatic dependent launch for the bf16 kernels and the MXFP4 decode
// (warp) kernels (sm_90 and newer; on by default): a launch starts while the
// kernel before it on the stream drains, loading its first weights, and waits
// for it before it reads activations. Same bits either way; off only to
// measure one launch alone. Process-wide.
void set_pdl(bool on);
// The shape of the bf16 decode launches (one token): rows a block and 16-byte
// chunks a thread loads ahead per row. Every tuning gives the same bits (a
// row's sum is one thread order); only the speed differs (bench/
// cuda_kernels.cu measures each). Default {2, 2}; bf16_tunings() lists the
// others ({4, 4} was the default before). Process-wide; not to be changed
// while another thread launches.
struct Bf16Tuning {
  int rows, ahead;
};
std::vector<Bf16Tuning> bf16_tunings();
void set_bf16_tuning(Bf16Tuning t);  // std::invalid_argument if not in the list
Bf16Tuning bf16_tuning();

// ---- MXFP4 weights (spec §2.9): packed [rows][cols/2], scale [rows][cols/32]
// `packed` must be 16-byte aligned; cols % 32 == 0 and cols <= 7168.
void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* x, float* y,
                  void* stream = nullptr);
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols, const float* X, int n,
                  float* Y, void* stream = nullptr);

// One matrix of a grouped call: Y = W X for n tokens (n = 0 is allowed).
struct MxTask {
  const uint8_t* packed;
  const uint8_t* scale;
  const float* X;  // [n][cols]
  float* Y;        // [n][rows]
  int n;
};
// Every task's matrix has the same rows × cols (one expert projection, e.g.
// the gate of each selected expert). One launch for decode (n = 1 per task)
// and for prefill (expert-major: the tokens routed to each expert). `tasks`
// is a host array; the call copies it into the launch.
void grouped_mxfp4(const MxTask* tasks, int ntasks, int rows, int cols, void* stream = nullptr);

// How the MXFP4 kernels decode E2M1 codes (by shared-memory lookup, or by
// integer bit placement + fp16 conversion) and how many
// rows each thread loads ahead (4 or 8; lookup_async also 2). Every setting of
// a family (mxfp4_family below) gives the same bits; only the speed differs
// (bench/cuda_kernels.cu measures them all). Process-wide; not to be changed
// while another thread launches.
// lookup_async: the lookup decode with the weights streamed through shared
// memory by cp.async (decode launches only; prefill falls back to lookup).
// lookup_bf16: a table of bf16 pairs (4 bytes per code byte instead of 8:
// half the shared-memory traffic, one shift or mask more per code).
// warp, warp3 (mxfp4_warp.cu): decode launches by a warp per row
// (rows_per_thread: rows per warp, 2 or 4; the lanes split a row's groups),
// no partial sums in shared memory; one (warp1: up to 255 registers, so
// every load of a tile is in flight at once), two (warp) or three (warp3)
// 8-warp blocks per SM; warp_auto (4 rows: the default): warp3, or warp when
// the launch's tiles split over two blocks an SM much more evenly than over
// three (K3's down projection: 4.5 tiles a block with three). At two blocks
// an SM the warp kernels keep a ring of loads across tiles (mxfp4_warp.cu).
// warp_mix1: warp with one code word in four decoded by a float2 table
// (PRMT + LDS.64 per two codes: fewer integer instructions, twice the
// shared-memory bytes, 96 KB a block); warp_f2: all of them. Prefill falls
// back to lookup_bf16 (same bits).
// mma, mma3 (mxfp4_mma.cu): tensor cores, exact products summed by the
// tensor core, two or three blocks an SM; rows_per_thread: 16-row blocks a
// warp (1 or 2; mma3: 1). Their own bits (family 1, below) at the widths they
// take (cols % 512 == 0, cols <= 5120); other widths use warp_auto's kernels.
// Measured slower than warp_auto (docs/decisions.md, "CUDA kernels").
enum class Mxfp4Decode {
  lookup, bits, lookup_async, lookup_bf16, warp, warp3, warp1, warp_f2, warp_mix1, warp_auto, mma, mma3
};
struct Mxfp4Tuning {
  Mxfp4Decode decode;
  int rows_per_thread;
};
void set_mxfp4_tuning(Mxfp4Tuning t);
Mxfp4Tuning mxfp4_tuning();
// Every valid tuning (the tests and the benchmark walk them all).
const std::vector<Mxfp4Tuning>& mxfp4_tunings();
const char* mxfp4_decode_name(Mxfp4Decode d);
// Tunings of one family give the same bits at a width (0: the FMA chain of
// mxfp4.cu's header, 1: the tensor cores' sums); families differ by summation
// order only.
int mxfp4_family(Mxfp4Tuning t, int cols);
// The shape of the last MXFP4 launch (for the benchmark's report).
struct Mxfp4Launch {
  int blocks, threads, blocks_per_sm;
  size_t smem_bytes;
};
Mxfp4Launch mxfp4_last_launch();

// ---- MXFP4 in fragment order (mxfp4_frag.cu): the engine's expert kernel --
// A matrix's bytes permuted once on the device (mxfp4_frag_packed/_scale:
// codes and scales, from the layout above into buffers of the sizes below,
// rows padded to 32) so that the decode GEMV streams each warp's bytes
// contiguously and multiplies on tensor cores: exact products (E2M1 × scale
// in bf16, x as three bf16 parts), summed in FP32 by the tensor core and
// then over 8 warps in a fixed order. Its own family of bits (not the FMA
// chain's, not mma's): bitwise matmul(X)[t] == matvec(X[t]) and grouped ==
// one by one, within 1e-5·Σ|w·x| of ref like the others. Widths with
// cols % 128 == 0, 1024 <= cols <= 7168 (K3's experts: 3584 and 3072).
// grouped_mxfp4_frag: as grouped_mxfp4, with every task's packed/scale in
// fragment order (16-byte aligned). Tokens of a task go through one at a time.
bool mxfp4_frag_takes(int rows, int cols);
size_t mxfp4_frag_packed_bytes(int rows, int cols);
size_t mxfp4_frag_scale_bytes(int rows, int cols);
void mxfp4_frag_packed(const uint8_t* packed, int rows, int cols, uint8_t* frag, void* stream = nullptr);
void mxfp4_frag_scale(const uint8_t* scale, int rows, int cols, uint8_t* frag, void* stream = nullptr);
void grouped_mxfp4_frag(const MxTask* tasks, int ntasks, int rows, int cols, void* stream = nullptr);

// ---- the read ceiling ----------------------------------------------------
// Reads `bytes` (a multiple of 16) at p once, 16-byte loads on `blocks`
// blocks of 512 threads: the HBM bandwidth a weight-bound kernel can reach.
// `sink` (one uint32) keeps the loads alive; what it holds means nothing.
void read_all(const void* p, size_t bytes, uint32_t* sink, int blocks, void* stream = nullptr);

// ---- element-wise and row ops --------------------------------------------
// Y[t] = rmsnorm(X[t]; w, eps) for t < n rows of width `width` (ref::rmsnorm).
void rmsnorm_rows(const float* X, const float* w, int n, int width, float eps, float* Y, void* stream = nullptr);
// out[i] = ref::situ(g[i], u[i], beta, beta_lin) for i < n. out may alias g or u.
void situ_glu(const float* g, const float* u, int64_t n, float beta, float beta_lin, float* out,
              void* stream = nullptr);

// ---- KDA -------------------------------------------------------------------
// The KDA recurrence (kernels/kda_parts.h: kda::recur) for T positions of NH
// heads of width D, on device memory: position 0 decays from F (which may be
// S), later ones from S ([NH][D][D]); q, k, v, decay are [T][NH·D] (prepared:
// conv, norms and gates done), b [T][NH] (σ(β)); o [T][NH·D] (before the
// gated norm), or null: the state alone. Bitwise kda::recur: column j of a
// head is one thread's, its sums over i in order, no contraction.
void kda_recur(int NH, int D, int T, const float* F, float* S, const float* q, const float* k, const float* v,
               const float* decay, const float* b, float* o, void* stream = nullptr);

// ---- MLA attention (backend.h: mla_attend), per head h and new position t --
// kv_b [NH][nope+v_dim][kv_lora] bf16; q [T][NH][nope+rope]; cache
// [base+T][kv_lora+rope]; score and p [T][NH][base+T] (row t's first
// base+t+1 used); qT [T][kv_lora+rope][NH]: q̂ then q_pe, head-minor; chat
// [T][NH][kv_lora]. Each output one thread's sum in the scalar entry's
// order: bitwise its q̂, scores and ĉ.
// K3.1 Pro (backend.h: mla_attend_sparse): with pick.sel (device memory) row t
// attends to the nsel[t] ascending positions at sel + t·ld, and score / p
// rows are pick.ld wide, term i at column i.
struct MlaPick {
  const int* sel = nullptr;
  const int* nsel = nullptr;
  int ld = 0;
};
int score_ld(int64_t base, int T, MlaPick pick);
void mla_qhat(const uint16_t* kv_b, int NH, int nope, int v_dim, int kv_lora, int rope, int T, const float* q,
              float* qT, void* stream = nullptr);
void mla_scores(int NH, int kv_lora, int rope, int64_t base, int T, const float* qT, const float* cache, float scale,
                float* score, void* stream = nullptr, MlaPick pick = {});
void mla_mix(int NH, int kv_lora, int rope, int64_t base, int T, const float* p, const float* cache, float* chat,
             void* stream = nullptr, MlaPick pick = {});

// ---- K3.1 Pro's indexer scores (backend.h: dsa_select; kernels/dsa.h) -------
// score[t][s] for s <= base+t (row t at score + t·ld): queries qi
// [T][heads·dim], weights w [T][heads], keys [base+T][dim], all device memory.
// Bitwise dsa::scores_scalar: d_h a thread's sum over j in order, the heads'
// sum in order, no contraction. The top-k is the caller's.
void dsa_scores(int heads, int dim, int64_t base, int T, const float* qi, const float* w, const float* keys, int ld,
                float* score, void* stream = nullptr);

}  // namespace sluice::cuda
