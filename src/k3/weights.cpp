#include "k3/weights.h"

#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/numeric.h"
#include "base/file_io.h"
#include "io/span_reader.h"

namespace sluice {

namespace {


// Binds the tensors of one unit: matrices are located (read later, where the
// spine wants them), vectors read and converted to FP32 now.
struct Binder {
  const Checkpoint& ck;
  std::string prefix;
  UnitTensors* found = nullptr;  // where located matrices and vector sizes go

  enum Use { Multiplied, Indexed, Pinned };
  void matrix(const std::string& name, int64_t rows, int64_t cols, Bf16Matrix* dst, Use use = Multiplied) {
    FileSpan span;
    if (layout_only(ck)) {
      // Where the config says it is: one file per unit, tensors back to back.
      span = {layout_file, layout_at, uint64_t(rows) * uint64_t(cols) * 2};
      layout_at += span.length;
    } else {
      span = ck.tensor(prefix + name, DType::BF16, {rows, cols}).span();
    }
    dst->rows = int(rows);
    dst->cols = int(cols);
    dst->w = nullptr;
    (use == Pinned ? found->pinned : located).push_back({dst, span, use == Indexed});
  }
  std::vector<MatrixRef> located;  // multiplied or indexed, in binding order
  int layout_file = 0;             // a layout-only checkpoint's: this unit's made-up file
  uint64_t layout_at = 0;

  // Hands the located matrices on in `order` (the sublayer's use order).
  void finish(const std::vector<Bf16Matrix*>& order) {
    if (!found) return;
    for (Bf16Matrix* m : order)
      for (const MatrixRef& r : located)
        if (r.view == m) found->matrices.push_back(r);
    if (found->matrices.size() != located.size()) fail(prefix, "a bound matrix is missing from its use order");
  }

  // A vector of `n` values (or the first n of a longer one when `prefix_of`), bf16 or f32.
  std::vector<float> vec(const std::string& name, int64_t n, std::vector<int64_t> shape = {},
                         bool prefix_of = false) {
    if (layout_only(ck)) {  // nothing to read: the plan needs only its size
      if (found) found->vector_bytes += uint64_t(n) * sizeof(float);
      return std::vector<float>(size_t(n), 0.0f);
    }
    const TensorInfo& t = ck.tensor(prefix + name);
    const std::string& where = ck.shard_paths[size_t(t.shard)];
    if (shape.empty()) shape = {n};
    if (t.dtype != DType::F32 && t.dtype != DType::BF16)
      fail(where, "tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) + ", expected F32 or BF16");
    if (prefix_of) {
      if (t.shape.size() != 1 || t.shape[0] < n)
        fail(where, "tensor '" + t.name + "' must be 1-D with at least " + std::to_string(n) + " entries");
    } else if (t.shape != shape) {
      (void)ck.tensor(prefix + name, t.dtype, shape);  // throws with the shape message
    }
    std::vector<uint8_t> raw(t.nbytes);
    read_exact(where, raw.data(), t.nbytes, t.offset);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) {
      if (t.dtype == DType::F32) {
        std::memcpy(&out[size_t(i)], raw.data() + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        out[size_t(i)] = bf16_to_f32(h);
      }
    }
    for (float v : out)
      if (!std::isfinite(v)) fail(where, "tensor '" + t.name + "' holds a non-finite value");
    if (found) found->vector_bytes += uint64_t(n) * sizeof(float);
    return out;
  }

  // u = res_norm ⊙ res_proj in FP32 (AttnRes uses only the product).
  std::vector<float> attn_res_query(const std::string& norm, const std::string& proj, int64_t h) {
    std::vector<float> w = vec(norm, h);
    std::vector<float> p = vec(proj, h, {1, h});
    for (int64_t i = 0; i < h; i++) w[size_t(i)] *= p[size_t(i)];
    return w;
  }

};

// docs/k31-spec.md §2.1: the three matrices BF16 (required), the key norm's
// gain required and its shift optional (zeros when absent).
void bind_indexer(Binder& b, const ModelConfig& c, MlaWeights& m) {
  const int64_t H = c.hidden_size, NI = c.dsa_n_heads, DI = c.dsa_head_dim;
  b.matrix("self_attn.indexer.wq_b.weight", NI * DI, c.q_lora_rank, &m.idx_q_b);
  b.matrix("self_attn.indexer.wk.weight", DI, H, &m.idx_k);
  b.matrix("self_attn.indexer.weights_proj.weight", NI, H, &m.idx_w);
  m.idx_k_norm_w = b.vec("self_attn.indexer.k_norm.weight", DI);
  const bool has_bias = !layout_only(b.ck) && b.ck.find(b.prefix + "self_attn.indexer.k_norm.bias");
  m.idx_k_norm_b = has_bias ? b.vec("self_attn.indexer.k_norm.bias", DI) : std::vector<float>(size_t(DI), 0.0f);
}

void bind_attention(Binder& b, const ModelConfig& c, int l, LayerWeights& w) {
  const int64_t H = c.hidden_size;
  w.input_norm = b.vec("input_layernorm.weight", H);
  w.u_attn = b.attn_res_query("self_attention_res_norm.weight", "self_attention_res_proj.weight", H);
  if (c.is_kda_layer(l)) {
    const int64_t NH = c.kda_num_heads, D = c.kda_head_dim, C = NH * D, K = c.kda_conv_kernel;
    KdaWeights& k = w.kda;
    b.matrix("self_attn.q_proj.weight", C, H, &k.q);
    b.matrix("self_attn.k_proj.weight", C, H, &k.k);
    b.matrix("self_attn.v_proj.weight", C, H, &k.v);
    b.matrix("self_attn.g_proj.weight", C, H, &k.g);
    b.matrix("self_attn.f_a_proj.weight", D, H, &k.f_a);
    b.matrix("self_attn.f_b_proj.weight", C, D, &k.f_b);
    b.matrix("self_attn.b_proj.weight", NH, H, &k.b);
    b.matrix("self_attn.o_proj.weight", H, C, &k.o);
    k.q_conv = b.vec("self_attn.q_conv1d.weight", C * K, {C, 1, K});
    k.k_conv = b.vec("self_attn.k_conv1d.weight", C * K, {C, 1, K});
    k.v_conv = b.vec("self_attn.v_conv1d.weight", C * K, {C, 1, K});
    // A_log is one rate per head; K3 stores it zero-padded to head_dim. Use the first NH.
    k.a = b.vec("self_attn.A_log", NH, {}, /*prefix_of=*/true);
    for (float& a : k.a) a = std::exp(a);
    k.dt_bias = b.vec("self_attn.dt_bias", C);
    k.o_norm = b.vec("self_attn.o_norm.weight", D);
  } else {
    const int64_t NH = c.num_attention_heads, QH = c.mla_q_head_dim();
    const int64_t KVB = c.qk_nope_head_dim + c.v_head_dim;
    MlaWeights& m = w.mla;
    b.matrix("self_attn.q_a_proj.weight", c.q_lora_rank, H, &m.q_a);
    m.q_a_norm = b.vec("self_attn.q_a_layernorm.weight", c.q_lora_rank);
    b.matrix("self_attn.q_b_proj.weight", NH * QH, c.q_lora_rank, &m.q_b);
    b.matrix("self_attn.kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, H, &m.kv_a);
    m.kv_a_norm = b.vec("self_attn.kv_a_layernorm.weight", c.kv_lora_rank);
    b.matrix("self_attn.g_proj.weight", NH * c.v_head_dim, H, &m.g);
    b.matrix("self_attn.kv_b_proj.weight", NH * KVB, c.kv_lora_rank, &m.kv_b, Binder::Indexed);  // per-head slices
    b.matrix("self_attn.o_proj.weight", H, NH * c.v_head_dim, &m.o);
    if (c.is_dsa_layer(l)) bind_indexer(b, c, m);
  }

}

void bind_ffn(Binder& b, const ModelConfig& c, int l, LayerWeights& w) {
  const int64_t H = c.hidden_size;
  w.post_norm = b.vec("post_attention_layernorm.weight", H);
  w.u_mlp = b.attn_res_query("mlp_res_norm.weight", "mlp_res_proj.weight", H);
  if (!c.is_moe_layer(l)) {
    b.matrix("mlp.gate_proj.weight", c.intermediate_size, H, &w.dense.gate);
    b.matrix("mlp.up_proj.weight", c.intermediate_size, H, &w.dense.up);
    b.matrix("mlp.down_proj.weight", H, c.intermediate_size, &w.dense.down);
  } else {
    const int64_t E = c.num_experts, Lat = c.routed_expert_hidden_size, S = c.shared_intermediate();
    MoeWeights& m = w.moe;
    b.matrix("block_sparse_moe.gate.weight", E, H, &m.router, Binder::Pinned);  // lookahead needs it early
    m.bias = b.vec("block_sparse_moe.gate.e_score_correction_bias", E);
    b.matrix("block_sparse_moe.routed_expert_down_proj.weight", Lat, H, &m.rdown);
    m.rnorm = b.vec("block_sparse_moe.routed_expert_norm.weight", Lat);
    b.matrix("block_sparse_moe.routed_expert_up_proj.weight", H, Lat, &m.rup);
    if (S > 0) {
      b.matrix("block_sparse_moe.shared_experts.gate_proj.weight", S, H, &m.sh_gate);
      b.matrix("block_sparse_moe.shared_experts.up_proj.weight", S, H, &m.sh_up);
      b.matrix("block_sparse_moe.shared_experts.down_proj.weight", H, S, &m.sh_down);
    }
  }
}

}  // namespace

GlobalWeights load_global_weights(const Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  GlobalWeights g;
  Binder b{ck, "", nullptr, {}};
  g.embed = ck.tensor("model.embed_tokens.weight", DType::BF16, {c.vocab_size, c.hidden_size});
  g.head = ck.tensor("lm_head.weight", DType::BF16, {c.vocab_size, c.hidden_size});
  g.final_norm = b.vec("model.norm.weight", c.hidden_size);
  g.u_out = b.attn_res_query("model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight", c.hidden_size);
  return g;
}

void read_bf16_rows(const Checkpoint& ck, const TensorInfo& t, int64_t first, int64_t count, uint16_t* out) {
  const uint64_t row = uint64_t(t.shape[1]) * 2;
  read_exact(ck.shard_paths[size_t(t.shard)], out, uint64_t(count) * row, t.offset + uint64_t(first) * row);
}

void bind_layer_part(const Checkpoint& ck, int layer, LayerPart part, LayerWeights& w, UnitTensors* out) {
  Binder b{ck, "model.layers." + std::to_string(layer) + ".", out, {}};
  b.layout_file = 2 * layer + int(part);
  const ModelConfig& c = ck.config;
  if (part == LayerPart::Attention) {
    bind_attention(b, c, layer, w);
    b.finish(c.is_kda_layer(layer) ? w.kda.use_order() : w.mla.use_order());
  } else {
    bind_ffn(b, c, layer, w);
    b.finish(c.is_moe_layer(layer) ? w.moe.use_order() : w.dense.use_order());
  }
}

AlignedBuffer read_matrices(const Checkpoint& ck, const std::vector<MatrixRef>& refs) {
  uint64_t total = 0;
  for (const MatrixRef& r : refs) total += SpanReader::direct_capacity(r.span.length);
  AlignedBuffer buf(total ? total : 1);
  if (refs.empty()) return buf;
  SpanReader reader(ck.shard_paths);
  std::vector<uint64_t> tickets;
  uint64_t at = 0;
  for (const MatrixRef& r : refs) {
    const uint64_t cap = SpanReader::direct_capacity(r.span.length);
    tickets.push_back(reader.submit(r.span.file, r.span.offset, r.span.length, std::span<uint8_t>(buf.data() + at, cap)));
    at += cap;
  }
  for (size_t i = 0; i < refs.size(); i++)
    refs[i].view->w = reinterpret_cast<const uint16_t*>(reader.wait(tickets[i]).data);
  return buf;
}

}  // namespace sluice
