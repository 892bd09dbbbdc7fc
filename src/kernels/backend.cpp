// The CPU entries of the op table (kernels/backend.h): `scalar` (kernels/ref.h
// and the model-level loops below, which are the definitions), `avx2` (the
// matrix products of kernels/fast_avx2.cpp) and `avx512` (those of
// kernels/fast_avx512.cpp, the same bits); every other op is the scalar one,
// so those stay bitwise equal across entries.
//
// The model-level loops were k3/'s inline code (kda.cpp, mla.cpp, moe.cpp,
// attn_res.cpp, model.cpp) and keep its exact operation order: logits did not
// move by a bit when they moved here. Scratch is per calling thread and kept
// between calls.
#include "kernels/backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/numeric.h"
#include "kernels/dsa.h"
#include "kernels/fast.h"
#include "kernels/fast_avx2.h"
#include "kernels/fast_avx512.h"
#include "kernels/kda_parts.h"
#include "kernels/ref.h"
#include "kernels/threads.h"

namespace sluice {

WeightOwner next_weight_owner() {
  static std::atomic<WeightOwner> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// A per-thread scratch vector, grown on demand and kept (slot: which one).
float* scratch(int slot, size_t n) {
  thread_local std::vector<float> buf[4];
  std::vector<float>& b = buf[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// ---- matrix products -------------------------------------------------------

// A products.h function as a table op: the adapters every CPU entry's
// products go through (Product: ref::, fast::avx2:: or fast::avx512::).
template <void (*Product)(const uint16_t*, int, int, const float*, float*)>
void bf16_matvec(const Bf16Ref& W, const float* x, float* y) { Product(W.w, W.rows, W.cols, x, y); }
template <void (*Product)(const uint16_t*, int, int, const float*, int, float*)>
void bf16_matmul(const Bf16Ref& W, const float* X, int n, float* Y) { Product(W.w, W.rows, W.cols, X, n, Y); }
template <void (*Product)(const uint8_t*, const uint8_t*, int, int, const float*, float*)>
void mxfp4_matvec(const Mxfp4Ref& W, const float* x, float* y) { Product(W.packed, W.scale, W.rows, W.cols, x, y); }
template <void (*Product)(const uint8_t*, const uint8_t*, int, int, const float*, int, float*)>
void mxfp4_matmul(const Mxfp4Ref& W, const float* X, int n, float* Y) {
  Product(W.packed, W.scale, W.rows, W.cols, X, n, Y);
}
template <void (*Product)(const uint8_t*, int, int, const float*, float*)>
void int8_matvec(const Int8Ref& W, const float* x, float* y) { Product(W.w, W.rows, W.cols, x, y); }
template <void (*Product)(const uint8_t*, int, int, const float*, int, float*)>
void int8_matmul(const Int8Ref& W, const float* X, int n, float* Y) { Product(W.w, W.rows, W.cols, X, n, Y); }

template <void (*Matmul)(const Mxfp4Ref&, const float*, int, float*)>
void grouped_mxfp4(const Mxfp4Task* tasks, int ntasks) {
  for (int i = 0; i < ntasks; i++)
    if (tasks[i].n > 0) Matmul(tasks[i].W, tasks[i].X, tasks[i].n, tasks[i].Y);
}

// ---- row ops ---------------------------------------------------------------

void rmsnorm_rows(const float* X, size_t ldx, F32Ref w, int n, int width, float eps, float* Y, size_t ldy) {
  for (int t = 0; t < n; t++) ref::rmsnorm(X + size_t(t) * ldx, w.v, width, eps, Y + size_t(t) * ldy);
}

void add(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void situ_glu(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out) {
  for (size_t i = 0; i < n; i++) out[i] = ref::situ(g[i], u[i], beta, beta_lin);
}

// The same elementwise loop split over the kernel pool in blocks (each
// element is one call of ref::situ wherever it runs: the same bits). Three
// libm calls an element make it a host hot spot: 16 experts × 3072 values a
// MoE layer took ~3 ms on one core.
void threaded_situ_glu(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out) {
  constexpr size_t kBlock = 1024;
  if (n < 2 * kBlock) return situ_glu(g, u, n, beta, beta_lin, out);
  kernels::parallel_for(int64_t((n + kBlock - 1) / kBlock), [&](int64_t b0, int64_t b1) {
    const size_t i0 = size_t(b0) * kBlock, i1 = std::min(n, size_t(b1) * kBlock);
    situ_glu(g + i0, u + i0, i1 - i0, beta, beta_lin, out + i0);
  });
}

void attn_res(const float* const* sources, int nsrc, F32Ref u, int T, int H, float eps, float* out) {
  float* score = scratch(0, size_t(nsrc));
  for (int t = 0; t < T; t++) {
    const size_t row = size_t(t) * H;
    for (int j = 0; j < nsrc; j++) {
      const float* v = sources[j] + row;
      const float r = ref::rms_inv(v, H, eps);
      float s = 0.0f;
      for (int d = 0; d < H; d++) s += (v[d] * r) * u.v[d];
      score[j] = s;
    }
    ref::softmax(score, nsrc);
    float* o = out + row;
    for (int d = 0; d < H; d++) o[d] = 0.0f;
    for (int j = 0; j < nsrc; j++) {
      const float* v = sources[j] + row;
      const float p = score[j];
      for (int d = 0; d < H; d++) o[d] += p * v[d];
    }
  }
}

void route(const float* logits, F32Ref bias, int T, int E, int k, float scaling, int* ids, float* weights) {
  float* s = scratch(0, size_t(E));
  float* biased = scratch(1, size_t(E));
  thread_local std::vector<int> order;
  order.resize(size_t(E));
  for (int t = 0; t < T; t++) {
    const float* lg = logits + size_t(t) * E;
    for (int e = 0; e < E; e++) {
      s[e] = ref::sigmoid(lg[e]);
      biased[e] = s[e] + bias.v[e];
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      if (biased[a] != biased[b]) return biased[a] > biased[b];
      return a < b;
    });
    float sum = 0.0f;
    for (int i = 0; i < k; i++) sum += s[order[size_t(i)]];
    // The fixture oracle clamps the denominator at 6.1e-5 (HF adds 1e-20); equal for any real sum.
    sum = std::max(sum, 6.103515625e-5f);
    for (int i = 0; i < k; i++) {
      ids[size_t(t) * k + i] = order[size_t(i)];
      weights[size_t(t) * k + i] = s[order[size_t(i)]] / sum * scaling;
    }
  }
}

void moe_combine(const float* expert_out, const int* ids, const float* weights, int T, int k, int width, float* out) {
  thread_local std::vector<int> slot_order;
  slot_order.resize(size_t(k));
  for (int t = 0; t < T; t++) {
    const int* tid = ids + size_t(t) * k;
    std::iota(slot_order.begin(), slot_order.end(), 0);
    std::sort(slot_order.begin(), slot_order.end(), [&](int a, int b) { return tid[a] != tid[b] ? tid[a] < tid[b] : a < b; });
    float* r = out + size_t(t) * width;
    for (int j = 0; j < width; j++) r[j] = 0.0f;
    for (int s : slot_order) {
      const float wt = weights[size_t(t) * k + s];
      const float* eo = expert_out + (size_t(t) * k + s) * width;
      for (int j = 0; j < width; j++) r[j] += wt * eo[j];
    }
  }
}

// One KDA position (kernels/kda_parts.h). The decay reads the state from
// `from` and writes S; with o_row null only the state advances. Threaded:
// the heads split over the kernel pool (each head's state and output are one
// thread's, in the same order: the same bits).
template <bool Threaded>
void kda_position(const KdaDims& d, const KdaParams& w, const float* from, float* S_all, float* conv, const float* q,
                  const float* k, const float* v, const float* f, const float* beta, const float* z, float* o_row) {
  const int NH = d.heads, D = d.dim, C = NH * D;
  float* qc = scratch(0, size_t(C));
  float* kc = scratch(1, size_t(C));
  float* vc = scratch(2, size_t(C));
  float* decay = scratch(3, size_t(C) + size_t(NH));
  float* b = decay + C;
  // A head's prepare reads and writes only its own channels: each range of
  // heads is prepared and recurred by one thread.
  auto heads = [&](int64_t h0, int64_t h1) {
    kda::prepare(d, w, conv, q, k, v, f, beta, qc, kc, vc, decay, b, int(h0), int(h1));
    thread_local std::vector<float> err;  // not scratch(): the caller's slots hold the rows above
    err.resize(size_t(D));
    for (int64_t h = h0; h < h1; h++) {
      const size_t hd = size_t(h) * D;
      kda::recur(D, from + hd * D, S_all + hd * D, qc + hd, kc + hd, vc + hd, decay + hd, b[h], err.data(),
                 o_row ? o_row + hd : nullptr);
      if (o_row) kda::gate(D, d.eps, w.o_norm, z + hd, o_row + hd);
    }
  };
  if (Threaded)
    kernels::parallel_for(NH, heads);
  else
    heads(0, NH);
}

template <bool Threaded>
void kda_chunk(const KdaDims& d, const KdaParams& w, const float* S_from, float* S, float* conv, int T,
               const KdaRows& in, float* out, StateStamp* stamp) {
  const int C = d.heads * d.dim;
  const float* from = S_from;
  for (int t = 0; t < T; t++) {
    const size_t row = size_t(t) * C;
    kda_position<Threaded>(d, w, from, S, conv, in.q + row, in.k + row, in.v + row, in.f + row,
                           in.beta + size_t(t) * d.heads, out ? in.z + row : nullptr, out ? out + row : nullptr);
    from = S;
  }
  if (stamp) stamp->to = 0;  // no copy kept
}

// ---- K3.1 Pro's indexer (docs/k31-spec.md §3.1-3.2) ------------------------

void dsa_layernorm_rows(const float* X, size_t ldx, F32Ref w, F32Ref b, int n, int width, float eps, float* Y,
                        size_t ldy) {
  for (int t = 0; t < n; t++) {
    const float* x = X + size_t(t) * ldx;
    float* y = Y + size_t(t) * ldy;
    float mean = 0.0f;
    for (int j = 0; j < width; j++) mean += x[j];
    mean /= float(width);
    float var = 0.0f;
    for (int j = 0; j < width; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= float(width);
    const float inv = 1.0f / std::sqrt(var + eps);
    for (int j = 0; j < width; j++) y[j] = (x[j] - mean) * inv * w.v[j] + b.v[j];
  }
}


// Per query: its score row, then its top-k. Threaded: the score row in blocks
// of positions over the kernel pool (each score is one lane's loop: the same bits).
template <void (*Scores)(const float*, const float*, const float*, int, int, int64_t, float*), bool Threaded>
void dsa_select(const DsaDims& d, const float* qi, const float* w, const float* keys, int64_t base, int T, int* sel,
                int* nsel) {
  constexpr int64_t kBlock = 256;
  for (int t = 0; t < T; t++) {
    const int64_t n = base + t + 1;
    const float* q = qi + size_t(t) * size_t(d.heads) * size_t(d.dim);
    const float* wt = w + size_t(t) * size_t(d.heads);
    float* score = scratch(0, size_t(n));
    if (n > int64_t(d.topk)) {  // else every position is selected, no score needed
      auto block = [&](int64_t b0, int64_t b1) {
        const int64_t s0 = b0 * kBlock, s1 = std::min(n, b1 * kBlock);
        Scores(q, wt, keys + size_t(s0) * size_t(d.dim), d.heads, d.dim, s1 - s0, score + s0);
      };
      if (Threaded)
        kernels::parallel_for((n + kBlock - 1) / kBlock, block);
      else
        block(0, (n + kBlock - 1) / kBlock);
    }
    thread_local std::vector<int> order;
    if (order.size() < size_t(n)) order.resize(size_t(n));
    nsel[t] = dsa::select_topk(score, n, d.topk, order.data(), sel + size_t(t) * size_t(d.topk));
  }
}

// A shard's tensors need not be 2-byte aligned (a header of odd length is
// valid safetensors), so kv_b's elements are loaded bytewise.
inline float bf16_at(const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_f32(h);
}

// Threaded: the heads split over the kernel pool (a head is one thread's, in
// the same order; Matvec nested in a pool job runs inline: the same bits).
// sel null: dense (position t attends to 0..base+t); else t attends to the
// nsel[t] ascending positions at sel + t·ldsel (K3.1 Pro, the skip form).
template <void (*Matvec)(const Bf16Ref&, const float*, float*), bool Threaded>
void mla_attend_over(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T, const float* q,
                     const float* gate, const int* sel, const int* nsel, int ldsel, float* att, StateStamp* stamp) {
  if (stamp) stamp->to = 0;  // no copy kept
  const int NH = d.heads, NOPE = d.nope, ROPE = d.rope, VD = d.v_dim, KVL = d.kv_lora;
  const int QH = NOPE + ROPE, KVW = KVL + ROPE, KVB = NOPE + VD;
  const float scale = 1.0f / std::sqrt(float(QH));
  for (int ts = 0; ts < T; ts++) {
    const int64_t n = sel ? nsel[ts] : base + ts + 1;  // causal: positions 0..base+ts, or the selection
    const int* pick = sel ? sel + size_t(ts) * size_t(ldsel) : nullptr;
    auto heads = [&](int64_t h0, int64_t h1) {
      float* qhat = scratch(0, size_t(KVL));  // this thread's
      float* chat = scratch(1, size_t(KVL));
      float* score = scratch(2, size_t(base + T));
      for (int64_t h = h0; h < h1; h++) {
        const float* qh = q + (size_t(ts) * NH + h) * QH;
        const uint16_t* Kh = kv_b.w + size_t(h) * KVB * KVL;  // [NOPE][KVL]
        const uint16_t* Uh = Kh + size_t(NOPE) * KVL;         // [VD][KVL]
        for (int j = 0; j < KVL; j++) qhat[j] = 0.0f;
        for (int i = 0; i < NOPE; i++) {
          const float qi = qh[i];
          const uint16_t* row = Kh + size_t(i) * KVL;
          for (int j = 0; j < KVL; j++) qhat[j] += bf16_at(row + j) * qi;
        }
        for (int64_t i = 0; i < n; i++) {
          const float* kv = cache + size_t(pick ? pick[i] : i) * KVW;
          float s = 0.0f;
          for (int j = 0; j < KVL; j++) s += qhat[j] * kv[j];
          for (int i = 0; i < ROPE; i++) s += qh[NOPE + i] * kv[KVL + i];
          score[size_t(i)] = s * scale;
        }
        ref::softmax(score, int(n));
        for (int j = 0; j < KVL; j++) chat[j] = 0.0f;
        for (int64_t i = 0; i < n; i++) {
          const float p = score[size_t(i)];
          const float* kv = cache + size_t(pick ? pick[i] : i) * KVW;
          for (int j = 0; j < KVL; j++) chat[j] += p * kv[j];
        }
        float* a = att + (size_t(ts) * NH + h) * VD;
        Matvec(Bf16Ref{Uh, VD, KVL, kv_b.owner}, chat, a);
        const float* g = gate + (size_t(ts) * NH + h) * VD;
        for (int j = 0; j < VD; j++) a[j] *= ref::sigmoid(g[j]);
      }
    };
    if (Threaded)
      kernels::parallel_for(NH, heads);
    else
      heads(0, NH);
  }
}

template <void (*Matvec)(const Bf16Ref&, const float*, float*), bool Threaded>
void mla_attend(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T, const float* q,
                const float* gate, float* att, StateStamp* stamp) {
  mla_attend_over<Matvec, Threaded>(d, kv_b, cache, base, T, q, gate, nullptr, nullptr, 0, att, stamp);
}
template <void (*Matvec)(const Bf16Ref&, const float*, float*), bool Threaded>
void mla_attend_sparse(const MlaDims& d, const Bf16Ref& kv_b, const float* cache, int64_t base, int T, const float* q,
                       const float* gate, const int* sel, const int* nsel, int ldsel, float* att, StateStamp* stamp) {
  mla_attend_over<Matvec, Threaded>(d, kv_b, cache, base, T, q, gate, sel, nsel, ldsel, att, stamp);
}

void release(WeightOwner) {}

const Backend kScalar = {
    "scalar",
    bf16_matvec<ref::matvec_bf16>,
    bf16_matmul<ref::matmul_bf16>,
    mxfp4_matvec<ref::matvec_mxfp4>,
    mxfp4_matmul<ref::matmul_mxfp4>,
    grouped_mxfp4<mxfp4_matmul<ref::matmul_mxfp4>>,
    int8_matvec<ref::matvec_int8>,
    int8_matmul<ref::matmul_int8>,
    rmsnorm_rows,
    add,
    situ_glu,
    attn_res,
    route,
    moe_combine,
    kda_chunk<false>,
    mla_attend<bf16_matvec<ref::matvec_bf16>, false>,
    dsa_layernorm_rows,
    dsa_select<dsa::scores_scalar, false>,
    mla_attend_sparse<bf16_matvec<ref::matvec_bf16>, false>,
    release,
    nullptr,
    nullptr,
};

#if defined(__x86_64__)
// A SIMD entry: the scalar entry with the given bf16 and MXFP4 products, the
// AVX2 int8 ones, SiTU-GLU and the KDA and MLA heads threaded. Every other op
// is the scalar one, so those stay bitwise equal across entries.
template <auto MatvecBf16, auto MatmulBf16, auto MatvecMxfp4, auto MatmulMxfp4, auto DsaScores>
Backend simd_table(const char* name) {
  Backend b = kScalar;
  b.name = name;
  b.matvec_bf16 = bf16_matvec<MatvecBf16>;
  b.matmul_bf16 = bf16_matmul<MatmulBf16>;
  b.matvec_mxfp4 = mxfp4_matvec<MatvecMxfp4>;
  b.matmul_mxfp4 = mxfp4_matmul<MatmulMxfp4>;
  b.grouped_mxfp4 = grouped_mxfp4<mxfp4_matmul<MatmulMxfp4>>;
  b.matvec_int8 = int8_matvec<fast::avx2::matvec_int8>;
  b.matmul_int8 = int8_matmul<fast::avx2::matmul_int8>;
  b.situ_glu = threaded_situ_glu;
  b.kda_chunk = kda_chunk<true>;
  b.mla_attend = mla_attend<bf16_matvec<MatvecBf16>, true>;
  b.dsa_select = dsa_select<DsaScores, true>;
  b.mla_attend_sparse = mla_attend_sparse<bf16_matvec<MatvecBf16>, true>;
  return b;
}

// Made on first use (callable from other files' static initializers).
const Backend& avx2_table() {
  static const Backend table = simd_table<fast::avx2::matvec_bf16, fast::avx2::matmul_bf16,
                                          fast::avx2::matvec_mxfp4, fast::avx2::matmul_mxfp4, dsa::scores_avx2>("avx2");
  return table;
}

// The same bits as avx2_table() (fast_avx512.h), two rows per register.
const Backend& avx512_table() {
  static const Backend table = simd_table<fast::avx512::matvec_bf16, fast::avx512::matmul_bf16,
                                          fast::avx512::matvec_mxfp4, fast::avx512::matmul_mxfp4, dsa::scores_avx512>("avx512");
  return table;
}
#endif

}  // namespace

const Backend& scalar_backend() { return kScalar; }

const Backend* avx2_backend() {
#if defined(__x86_64__)
  if (fast::best_isa() >= fast::Isa::avx2) return &avx2_table();
#endif
  return nullptr;
}

const Backend* avx512_backend() {
#if defined(__x86_64__)
  if (fast::best_isa() >= fast::Isa::avx512) return &avx512_table();
#endif
  return nullptr;
}

std::vector<const Backend*> backends() {
  std::vector<const Backend*> all{&scalar_backend()};
  for (const Backend* b : {avx2_backend(), avx512_backend()})
    if (b) all.push_back(b);
  return all;
}

const Backend& cpu_backend() {
  static const Backend& chosen = [&]() -> const Backend& {
    switch (fast::isa()) {
      case fast::Isa::avx512: return *avx512_backend();
      case fast::Isa::avx2: return *avx2_backend();
      case fast::Isa::scalar: break;
    }
    return scalar_backend();
  }();
  return chosen;
}

}  // namespace sluice
