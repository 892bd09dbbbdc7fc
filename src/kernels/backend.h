// kernels/backend.h — the arithmetic seam: every op the forward pass computes,
// as one table of plain function pointers per implementation.
//
// k3/ computes only through a `const Backend*` (Model::backend): it decides
// what to read and when (spine streaming, expert reads, prefetch, caches), the
// backend does the arithmetic. Entries: `scalar` (the definitions: plain loops
// over kernels/ref.h, one thread), `avx2` (kernels/fast_avx2.cpp for the matrix
// products, threaded; KDA's and MLA's heads threaded; the other ops as
// scalar), `avx512` (the avx2 entry with kernels/fast_avx512.cpp's bf16 and
// MXFP4 products: the same bits), `cuda` (kernels/cuda/: the bf16 and MXFP4
// products, the KDA recurrence and MLA attention on the GPU, every other op
// its CPU entry's own). The CPU entry is chosen once, at startup (kernels/fast.h).
// kernels/backend_test.cpp runs every op of every entry against `scalar` on
// random inputs; a new entry is tested by adding it to backends().
//
// Memory rules (so a device backend can plug in):
// - Activations and state (every `float*`/`int*` argument) are host memory,
//   valid for the call only; a device backend copies them in and out (they
//   are small next to the weights). An output may alias an input only where
//   the op says so. One exception saves the sequence state's uploads: a KDA
//   state and an MLA cache may also be named by a stamp (StateStamp), under
//   which a device backend keeps a copy of their bits; the host copy stays
//   the truth.
// - Weights come as a host pointer plus an owner (WeightOwner). owner != 0:
//   the bytes are stable and unchanged until release(owner) (resident spine
//   matrices and pieces, the FP32 vectors bound at load, the MoE routers): a
//   device backend may keep a copy keyed by (owner, pointer) and skip the
//   transfer next time. owner == 0: transient (a streaming-ring slot, an
//   expert read buffer or cache slot): valid for this call only, never keyed.
//   Owners are process-unique and never reused (next_weight_owner()).
// - An owner == 0 MXFP4 weight may carry a content key (Mxfp4Ref::content,
//   made by content_key()): the same key always comes with the same bytes,
//   wherever they sit in host memory (k3: a routed expert's projection; a RAM
//   cache slot's bytes change on eviction, the key does not). A device
//   backend may keep a copy keyed by it (the CUDA entry's VRAM expert tier)
//   until release(owner of the key). 0: no key. The CPU entries ignore it.
// - Host memory a device backend may read weights from directly can be
//   announced: register_host(p, n) after the memory is allocated (and faulted
//   in), unregister_host(p, n) before it is freed, with no call reading it in
//   between (the CUDA entry pins it: uploads from it are then plain DMA, no
//   staging copy). Both are null in the CPU entries; io/ calls them through
//   DirectSourceOptions::host_memory, never knowing which backend it is.
// - A backend keeps its own scratch (per calling thread on the CPU entries),
//   reused across calls; no op allocates per call once warm.
//
// Numerics: FP32 activations and accumulation. Each op below states its
// reduction order; "bitwise" ops give the same bits in every entry (they are
// the scalar loops), the matrix products and mla_attend (which contains one)
// differ between entries only by summation order (docs/kernels.md, numerics.md):
// |entry − scalar| <= 1e-5·Σ|w·x| per dot product. Within one entry every op is
// reproducible and independent of the thread count, and matmul(X)[t] is
// bitwise matvec(X[t]) (prefill equals decode).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice {

// Who guarantees a weight's bytes (see above): 0 = transient.
using WeightOwner = uint32_t;
// A fresh owner id (thread-safe; never 0, never repeated in this process).
WeightOwner next_weight_owner();

// A matrix [rows][cols] stored row after row (y = W x), `w` at its first
// row, not necessarily aligned (a safetensors shard may put a tensor at an
// odd offset; a pack puts rows back to back):
//   Bf16Ref: one bf16 per element;
//   Int8Ref: the int8 spine (kernels/ref.h): each row ref::int8_row_bytes(cols)
//            bytes, its FP32 group scales first, then an int8 per element.
template <class Element>
struct RowsRef {
  const Element* w = nullptr;
  int rows = 0, cols = 0;
  WeightOwner owner = 0;
};
using Bf16Ref = RowsRef<uint16_t>;
using Int8Ref = RowsRef<uint8_t>;

// An MXFP4 matrix [rows][cols] (spec §2.9): packed [rows][cols/2], element 2i
// in the low nibble; scale [rows][cols/32] E8M0. cols % 32 == 0.
struct Mxfp4Ref {
  const uint8_t* packed = nullptr;
  const uint8_t* scale = nullptr;
  int rows = 0, cols = 0;
  WeightOwner owner = 0;
  uint64_t content = 0;  // owner == 0 only: the content key (above), or 0
};

// A content key: `owner` (who releases it) in the high 32 bits, `item` (> 0,
// one per distinct matrix of that owner) in the low.
constexpr uint64_t content_key(WeightOwner owner, uint32_t item) { return uint64_t(owner) << 32 | item; }

// An FP32 weight vector (norm weights, AttnRes queries, router bias).
struct F32Ref {
  const float* v = nullptr;
  WeightOwner owner = 0;
};

// One matrix of a grouped MXFP4 call: Y = W X for n rows (n = 0 allowed).
struct Mxfp4Task {
  Mxfp4Ref W;
  const float* X = nullptr;  // [n][W.cols]
  float* Y = nullptr;        // [n][W.rows]
  int n = 0;
};

// KDA (spec §3.3) shapes and per-layer FP32 weights.
struct KdaDims {
  int heads = 0, dim = 0, conv_kernel = 0;  // NH, D (C = NH·D), K
  float eps = 0, gate_lower = 0;            // rms_norm_eps, kda_gate_lower_bound
};
struct KdaParams {
  const float *q_conv = nullptr, *k_conv = nullptr, *v_conv = nullptr;  // [C][K] taps, tap K-1 on the current token
  const float* a = nullptr;        // [NH] exp(A_log)
  const float* dt_bias = nullptr;  // [C]
  const float* o_norm = nullptr;   // [D]
  WeightOwner owner = 0;
};
// One chunk's projections, row t of each: q, k, v, f, z are [T][C], beta [T][NH].
struct KdaRows {
  const float *q = nullptr, *k = nullptr, *v = nullptr, *f = nullptr, *beta = nullptr, *z = nullptr;
};
// A sequence state's content stamp (a KDA state, an MLA latent cache), for an
// entry that keeps a copy of the state in its own memory (the CUDA entry:
// VRAM, so a decode step uploads no state). `from` names the state's bits
// before the call (0: none known); the call sets `to` to the name of its bits
// after (0: no copy kept; the CPU entries). A stamp names one set of state
// bits, so a copy of the state (a snapshot) may carry it; whoever changes
// those bits on the host sets its stamp to 0 (an MLA cache cut back to a
// prefix keeps its stamp: the prefix's bits are unchanged). The host copy is
// always written too: it stays the state's truth.
struct StateStamp {
  uint64_t from = 0, to = 0;
};

// Gated NoPE MLA (spec §3.4) shapes.
struct MlaDims {
  int heads = 0, nope = 0, rope = 0, v_dim = 0, kv_lora = 0;
};

// K3.1 Pro's lightning indexer (docs/k31-spec.md §3.1): heads × dim, top-k.
struct DsaDims {
  int heads = 0, dim = 0, topk = 0;
};

struct Backend {
  const char* name;

  // ---- Matrix products. y[r] = Σ_c W[r,c]·x[c]; X is [n][cols], Y is [n][rows].
  // Order: scalar sums c = 0..cols-1 left to right; avx2 as docs/kernels.md
  // ("The reduction orders"); never dependent on n or the thread count.
  void (*matvec_bf16)(const Bf16Ref& W, const float* x, float* y);
  void (*matmul_bf16)(const Bf16Ref& W, const float* X, int n, float* Y);
  void (*matvec_mxfp4)(const Mxfp4Ref& W, const float* x, float* y);
  void (*matmul_mxfp4)(const Mxfp4Ref& W, const float* X, int n, float* Y);
  // Every task has the same W.rows × W.cols (one projection of several
  // experts); bitwise the same as matmul_mxfp4 on each task in turn.
  void (*grouped_mxfp4)(const Mxfp4Task* tasks, int ntasks);
  // int8 rows: per row, the groups' sums (c in order within a group) times
  // their scales, added in group order (ref::matvec_int8); avx2 as docs/kernels.md.
  void (*matvec_int8)(const Int8Ref& W, const float* x, float* y);
  void (*matmul_int8)(const Int8Ref& W, const float* X, int n, float* Y);

  // ---- Row ops (bitwise in every entry).
  // Y[t] = w ⊙ X[t] / sqrt(mean(X[t]²) + eps) for t < n rows of `width`,
  // rows ldx / ldy floats apart (ref::rmsnorm per row). Y may alias X.
  void (*rmsnorm_rows)(const float* X, size_t ldx, F32Ref w, int n, int width, float eps, float* Y, size_t ldy);
  // y[i] += x[i] for i < n (residual adds).
  void (*add)(float* y, const float* x, size_t n);
  // out[i] = ref::situ(g[i], u[i], beta, beta_lin) (SiTU-GLU). out may alias g or u.
  void (*situ_glu)(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out);
  // AttnRes (spec §3.2) over nsrc sources, each [T][H]:
  //   out[t] = Σ_j p_j v_j,  p = softmax_j(Σ_d (v_j[d]·rms_inv(v_j)) · u[d]),  v_j = sources[j][t]
  // scores and sums over d = 0..H-1, then j = 0..nsrc-1 in order. out aliases none.
  void (*attn_res)(const float* const* sources, int nsrc, F32Ref u, int T, int H, float eps, float* out);
  // Router (spec §3.6) for T rows of logits [T][E]: s = σ(logit), the top-k
  // by s + bias (ties: smaller id first) into ids [T][k] in descending biased
  // score, weights [T][k] = s / max(Σ chosen s, 6.1e-5) · scaling (sum in slot order).
  void (*route)(const float* logits, F32Ref bias, int T, int E, int k, float scaling, int* ids, float* weights);
  // MoE combine: out[t] = Σ_slots weights[t][s] · expert_out[t][s], slots taken
  // in ascending expert id (ids[t][s]; ties by slot), from zero. expert_out is
  // [T][k][width], out [T][width].
  void (*moe_combine)(const float* expert_out, const int* ids, const float* weights, int T, int k, int width,
                      float* out);
  // KDA recurrence (spec §3.3, k3/kda.cpp) over T positions of one sequence.
  // Per position: causal conv + SiLU of q, k, v (conv = [3][K-1][C] history,
  // advanced); per head: q, k L2-normed (q also ·1/sqrt(D)), then
  //   S ← Diag(exp(g))·S, e = v − Sᵀk, S ← S + σ(β)·k eᵀ, o = Sᵀq,
  //   g = gate_lower·σ(a_h·(f + dt_bias)); out = o_norm ⊙ o·rms_inv(o) ⊙ σ(z).
  // The first position decays from S_from (S itself, or a saved copy of the
  // state before the chunk), later ones from S; S is [NH][D][D] (key i, value j).
  // out [T][C], or null: the state alone (a rollback replay; in.z unread and
  // may be null), same state bits. stamp: StateStamp above, or null (none).
  // Bitwise in every entry (kernels/kda_parts.h: the parts a device shares).
  void (*kda_chunk)(const KdaDims& d, const KdaParams& w, const float* S_from, float* S, float* conv, int T,
                    const KdaRows& in, float* out, StateStamp* stamp);
  // MLA attention over the latent cache, absorbed form (spec §3.4, k3/mla.cpp).
  // cache is [base+T][kv_lora+rope] (c′ then k_pe), the T new positions already
  // appended; q is [T][NH][nope+rope], gate [T][NH][v_dim], att [T][NH][v_dim].
  // Position t (0-based in the chunk) attends to cache rows 0..base+t; per head:
  //   q̂ = K_hᵀ q_nope, s(τ) = (q̂·c′(τ) + q_pe·k_pe(τ)) / sqrt(nope+rope),
  //   ĉ = Σ_τ softmax(s)(τ) c′(τ),  att = (U_h ĉ) ⊙ σ(gate)
  // with K_h, U_h head h's key / value rows of kv_b ([NH][nope+v_dim][kv_lora]).
  // Everything in scalar order except U_h ĉ, which is this entry's matvec_bf16.
  // stamp (StateStamp above, or null): `from` names cache rows 0..base-1, `to`
  // the rows 0..base+T-1 after the call.
  void (*mla_attend)(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T,
                     const float* q, const float* gate, float* att, StateStamp* stamp);

  // ---- K3.1 Pro's sparse attention (docs/k31-spec.md §3, k3/dsa.cpp).
  // LayerNorm per row (bitwise in every entry): Y[t] = (X[t] − μ)/sqrt(σ² + eps) ⊙ w + b,
  // μ and the biased σ² summed j = 0..width-1 in order. Y may alias X.
  void (*layernorm_rows)(const float* X, size_t ldx, F32Ref w, F32Ref b, int n, int width, float eps, float* Y,
                         size_t ldy);
  // Indexer scores and top-k for T queries at positions base..base+T-1 (bitwise
  // in every entry; kernels/dsa.h gives the formula and the tie rule): qi
  // [T][heads·dim], w [T][heads] (already scaled by 1/sqrt(heads·dim)), keys
  // [base+T][dim] (the chunk's keys appended). Query t's selection goes to
  // sel [t·topk ...) in ascending position, its count min(topk, base+t+1) to nsel[t].
  void (*dsa_select)(const DsaDims& d, const float* qi, const float* w, const float* keys, int64_t base, int T,
                     int* sel, int* nsel);
  // mla_attend with position t's softmax over its selection only: sel [t·ldsel
  // ...) holds nsel[t] ascending positions <= base+t, visited in that order (the
  // "skip form" of §3.3), so a selection of every position gives mla_attend's bits.
  void (*mla_attend_sparse)(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T,
                            const float* q, const float* gate, const int* sel, const int* nsel, int ldsel, float* att,
                            StateStamp* stamp);

  // Forgets anything kept for weights of `owner` (a device copy); the CPU
  // entries keep nothing. Called when the model that owns them closes.
  void (*release)(WeightOwner owner);

  // Host memory announcements (the memory rules above); null: not wanted.
  void (*register_host)(void* p, size_t n);
  void (*unregister_host)(void* p, size_t n);
};

// The scalar entry: the definitions. Always available.
const Backend& scalar_backend();
// The AVX2/FMA entry; nullptr when this CPU (or build) lacks it.
const Backend* avx2_backend();
// The AVX-512 entry (avx2's bits); nullptr when this CPU (or build) lacks it.
const Backend* avx512_backend();
// Every CPU entry this build and CPU can run, scalar first (backend_test.cpp's list).
std::vector<const Backend*> backends();
// The CPU entry of the kernel choice made at startup (fast::isa(): the best
// the CPU has, or the one SLUICE_KERNELS names).
const Backend& cpu_backend();

}  // namespace sluice
