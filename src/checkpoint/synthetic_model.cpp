#include "checkpoint/synthetic_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "base/atomic_file.h"
#include "base/error.h"

namespace sluice {

static_assert(std::endian::native == std::endian::little, "the generator writes little-endian bytes directly");

namespace {

constexpr const char* kWhere = "make-model";
constexpr int kMxfp4Group = 32;

// ---- Random numbers ---------------------------------------------------------
// splitmix64: word i of a stream is mix(key + (i+1)·γ), so any position can be
// generated on its own and the output does not depend on chunking.

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t stream_word(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * kGamma); }

// Bytes [offset, offset + n) of stream `key`.
void stream_bytes(uint64_t key, uint64_t offset, uint8_t* out, size_t n) {
  uint64_t w = offset >> 3;
  size_t i = 0;
  if (unsigned skip = unsigned(offset & 7)) {
    uint64_t v = stream_word(key, w++);
    for (unsigned k = skip; k < 8 && i < n; k++) out[i++] = uint8_t(v >> (8 * k));
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t v = stream_word(key, w++);
    std::memcpy(out + i, &v, 8);
  }
  if (i < n) {
    uint64_t v = stream_word(key, w);
    std::memcpy(out + i, &v, n - i);
  }
}

// One key per (seed, purpose) so every tensor has its own stream.
uint64_t key_of(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return mix64(h ^ mix64(seed + kGamma));
}

// A sequential generator for the few choices made while planning.
struct SeqRng {
  uint64_t state;
  uint64_t next() { return mix64(state += kGamma); }
  uint32_t below(uint32_t n) { return uint32_t(((next() >> 32) * n) >> 32); }
};

// ---- What each tensor holds -------------------------------------------------

enum class Gen {
  Uniform,      // U(lo, hi) in BF16 or F32
  ALog,         // log(U(1, 16)) for the first `valid` entries, 0 after (K3's padding)
  Mxfp4Codes,   // uniform E2M1 nibbles
  Mxfp4Scales,  // E8M0 exponents in {center-1, center, center+1}
};

struct Recipe {
  Gen gen = Gen::Uniform;
  DType dtype = DType::BF16;
  uint64_t key = 0;
  float lo = 0, hi = 0;
  int valid = 0;
  int scale_low = 0;  // smallest E8M0 byte of Mxfp4Scales
};

inline uint16_t bf16_round_finite(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// The value loops below run over fixed blocks of kLanes elements, so g++ -O2
// (whose cheap vectorizer wants a known trip count) turns them into SIMD code;
// the ragged tail takes the same arithmetic one element at a time.
constexpr size_t kLanes = 64;

// A random byte -> low, low+1 or low+2 (86/85/85 of the 256 values).
inline uint8_t scale_byte(uint8_t r, uint8_t low) { return uint8_t(low + (r >= 86) + (r >= 171)); }
inline uint16_t uniform_bf16(uint16_t u, float step, float base) {
  return bf16_round_finite(std::fma(float(u), step, base));
}
inline float uniform_f32(uint32_t u, float step, float base) { return std::fma(float(u >> 8), step, base); }

// Fills bytes [offset, offset + out.size()) of the tensor: random bytes first,
// then turned into values in place. Offsets are element-aligned (kFillChunk).
void generate(const Recipe& r, std::span<uint8_t> out, uint64_t offset) {
  uint8_t* p = out.data();
  const size_t n = out.size();
  stream_bytes(r.key, offset, p, n);
  size_t i = 0;
  switch (r.gen) {
    case Gen::Mxfp4Codes:
      return;
    case Gen::Mxfp4Scales: {
      const uint8_t low = uint8_t(r.scale_low);
      for (; i + kLanes <= n; i += kLanes)
        for (size_t k = 0; k < kLanes; k++) p[i + k] = scale_byte(p[i + k], low);
      for (; i < n; i++) p[i] = scale_byte(p[i], low);
      return;
    }
    case Gen::Uniform:
      if (r.dtype == DType::BF16) {
        // 16 random bits per element -> lo + (u + 1/2)·(hi - lo)/2^16.
        const float step = (r.hi - r.lo) / 65536.0f, base = r.lo + 0.5f * step;
        uint16_t v[kLanes];
        for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
          std::memcpy(v, p + i, sizeof v);
          for (size_t k = 0; k < kLanes; k++) v[k] = uniform_bf16(v[k], step, base);
          std::memcpy(p + i, v, sizeof v);
        }
        for (; i + 2 <= n; i += 2) {
          std::memcpy(v, p + i, 2);
          v[0] = uniform_bf16(v[0], step, base);
          std::memcpy(p + i, v, 2);
        }
      } else {
        // 24 random bits per element.
        const float step = (r.hi - r.lo) / 16777216.0f, base = r.lo + 0.5f * step;
        for (; i + 4 <= n; i += 4) {
          uint32_t u;
          std::memcpy(&u, p + i, 4);
          float f = uniform_f32(u, step, base);
          std::memcpy(p + i, &f, 4);
        }
      }
      return;
    case Gen::ALog:
      for (; i + 4 <= n; i += 4) {
        uint32_t u;
        std::memcpy(&u, p + i, 4);
        uint64_t element = (offset + i) / 4;
        float f = element < uint64_t(r.valid) ? std::log(uniform_f32(u, 15.0f / 16777216.0f, 1.0f + 7.5f / 16777216.0f))
                                              : 0.0f;
        std::memcpy(p + i, &f, 4);
      }
      return;
  }
}

// ---- Tensor inventory -------------------------------------------------------

struct PlannedTensor {
  TensorData data;
  std::string sort_key;  // data order inside the shard
  int shard = 0;
};

struct Planner {
  const SyntheticShape& s;
  uint64_t seed;
  std::vector<PlannedTensor> out;
  int shard = 0;

  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, Recipe r,
           std::string sort_key = {}) {
    r.dtype = dtype;
    r.key = key_of(seed, name);
    PlannedTensor t;
    t.data.name = "language_model." + name;
    t.data.dtype = dtype;
    t.data.shape = std::move(shape);
    t.data.fill = [r](std::span<uint8_t> o, uint64_t off) { generate(r, o, off); };
    t.sort_key = sort_key.empty() ? t.data.name : "language_model." + sort_key;
    t.shard = shard;
    out.push_back(std::move(t));
  }
  static Recipe uniform(float lo, float hi) { return Recipe{Gen::Uniform, DType::BF16, 0, lo, hi, 0, 0}; }
  // A projection [out, in]: std 1/sqrt(in) keeps activations O(1).
  void linear(const std::string& name, int64_t rows, int64_t cols) {
    float a = std::sqrt(3.0f / float(cols));
    add(name, DType::BF16, {rows, cols}, uniform(-a, a));
  }
  void norm(const std::string& name, int64_t n, DType dtype = DType::BF16) {
    add(name, dtype, {n}, uniform(0.95f, 1.05f));
  }
  // Scales 2^e with e centred so a uniform-code row times a unit-RMS input has
  // an output of RMS ~1: E|code|^2 = 8.56, so 2^e ≈ 2^-2 / sqrt(fan_in) per side.
  void mxfp4(const std::string& prefix, const std::string& sort_prefix, int64_t rows, int64_t cols) {
    int center = -2 - int(std::lround(std::log2(double(cols)) / 2));
    Recipe codes{Gen::Mxfp4Codes, DType::U8, 0, 0, 0, 0, 0};
    Recipe scales{Gen::Mxfp4Scales, DType::U8, 0, 0, 0, 0, 127 + center - 1};
    add(prefix + ".weight_packed", DType::U8, {rows, cols / 2}, codes, sort_prefix + ".weight_packed");
    add(prefix + ".weight_scale", DType::U8, {rows, cols / kMxfp4Group}, scales, sort_prefix + ".weight_scale");
  }

  void globals_first() {
    add("model.embed_tokens.weight", DType::BF16, {s.vocab, s.hidden}, uniform(-1.7320508f, 1.7320508f));
  }
  void globals_last() {
    linear("lm_head.weight", s.vocab, s.hidden);
    norm("model.norm.weight", s.hidden);
    norm("model.output_attn_res_norm.weight", s.hidden);
    linear("model.output_attn_res_proj.weight", 1, s.hidden);
  }

  void layer(int l, bool mla, const std::vector<int>& expert_rank) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int64_t H = s.hidden;
    norm(p + "input_layernorm.weight", H);
    norm(p + "post_attention_layernorm.weight", H);
    norm(p + "self_attention_res_norm.weight", H);
    linear(p + "self_attention_res_proj.weight", 1, H);
    norm(p + "mlp_res_norm.weight", H);
    linear(p + "mlp_res_proj.weight", 1, H);

    const std::string a = p + "self_attn.";
    if (!mla) {
      const int64_t D = int64_t(s.kda_heads) * s.kda_head_dim, d = s.kda_head_dim;
      for (const char* w : {"q_proj", "k_proj", "v_proj", "g_proj"}) linear(a + w + ".weight", D, H);
      linear(a + "o_proj.weight", H, D);
      linear(a + "f_a_proj.weight", d, H);
      linear(a + "f_b_proj.weight", D, d);
      linear(a + "b_proj.weight", s.kda_heads, H);
      float tap = std::sqrt(3.0f / float(s.kda_conv_kernel));
      for (const char* w : {"q_conv1d", "k_conv1d", "v_conv1d"})
        add(a + w + ".weight", DType::F32, {D, 1, s.kda_conv_kernel}, uniform(-tap, tap));
      // Per-head decay rates stored [head_dim], zero-padded past kda_heads, as K3 ships them.
      add(a + "A_log", DType::F32, {d}, Recipe{Gen::ALog, DType::F32, 0, 0, 0, s.kda_heads, 0});
      add(a + "dt_bias", DType::F32, {D}, uniform(-3.0f, -1.0f));  // decays neither 0 nor 1
      norm(a + "o_norm.weight", d, DType::F32);
    } else {
      const int64_t qh = s.nope + s.rope;
      linear(a + "q_a_proj.weight", s.q_lora, H);
      norm(a + "q_a_layernorm.weight", s.q_lora);
      linear(a + "q_b_proj.weight", int64_t(s.heads) * qh, s.q_lora);
      linear(a + "kv_a_proj_with_mqa.weight", s.kv_lora + s.rope, H);
      norm(a + "kv_a_layernorm.weight", s.kv_lora);
      linear(a + "kv_b_proj.weight", int64_t(s.heads) * (s.nope + s.v_head), s.kv_lora);
      linear(a + "g_proj.weight", int64_t(s.heads) * s.v_head, H);
      linear(a + "o_proj.weight", H, int64_t(s.heads) * s.v_head);
      if (s.index_heads > 0) {  // docs/k31-spec.md §2.1
        const std::string ix = a + "indexer.";
        linear(ix + "wq_b.weight", int64_t(s.index_heads) * s.index_head_dim, s.q_lora);
        linear(ix + "wk.weight", s.index_head_dim, H);
        linear(ix + "weights_proj.weight", s.index_heads, H);
        norm(ix + "k_norm.weight", s.index_head_dim);
        if (s.index_bias) add(ix + "k_norm.bias", DType::BF16, {s.index_head_dim}, uniform(-0.1f, 0.1f));
      }
    }

    if (l == 0) {  // first_k_dense_replace = 1
      linear(p + "mlp.gate_proj.weight", s.dense_inter, H);
      linear(p + "mlp.up_proj.weight", s.dense_inter, H);
      linear(p + "mlp.down_proj.weight", H, s.dense_inter);
      return;
    }
    const std::string m = p + "block_sparse_moe.";
    linear(m + "gate.weight", s.experts, H);
    // A bias spread comparable to the gaps between sigmoid scores, so it changes
    // which experts win for some tokens.
    add(m + "gate.e_score_correction_bias", DType::F32, {s.experts}, uniform(-0.1f, 0.1f));
    linear(m + "routed_expert_down_proj.weight", s.latent, H);
    norm(m + "routed_expert_norm.weight", s.latent);
    linear(m + "routed_expert_up_proj.weight", H, s.latent);
    const int64_t S = int64_t(s.shared) * s.moe_inter;
    linear(m + "shared_experts.gate_proj.weight", S, H);
    linear(m + "shared_experts.up_proj.weight", S, H);
    linear(m + "shared_experts.down_proj.weight", H, S);
    for (int e = 0; e < s.experts; e++) {
      // The sort key puts the experts in their shuffled order; the six tensors
      // of one expert stay together in w1, w2, w3 / packed, scale order.
      char rank[16];
      std::snprintf(rank, sizeof rank, "%08d", expert_rank[e]);
      std::string name = m + "experts." + std::to_string(e) + ".", key = m + "experts." + rank + ".";
      mxfp4(name + "w1", key + "w1", s.moe_inter, s.latent);
      mxfp4(name + "w2", key + "w2", s.latent, s.moe_inter);
      mxfp4(name + "w3", key + "w3", s.moe_inter, s.latent);
    }
  }
};

// A seeded permutation of 0..n-1 that is never the identity when n >= 2.
std::vector<int> shuffled_ranks(int n, uint64_t key) {
  std::vector<int> order(n);
  for (int i = 0; i < n; i++) order[i] = i;
  SeqRng rng{key};
  for (int i = n - 1; i > 0; i--) std::swap(order[i], order[rng.below(uint32_t(i + 1))]);
  bool identity = true;
  for (int i = 0; i < n; i++) identity = identity && order[i] == i;
  if (identity && n >= 2) std::swap(order[0], order[1]);
  std::vector<int> rank(n);
  for (int i = 0; i < n; i++) rank[order[i]] = i;
  return rank;
}

std::string shard_file_name(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
  return buf;
}

nlohmann::json quantization_config() {
  using json = nlohmann::json;
  json weights = {{"actorder", nullptr},  {"block_structure", nullptr}, {"dynamic", false},
                  {"group_size", 32},     {"num_bits", 4},              {"observer", "minmax"},
                  {"observer_kwargs", json::object()}, {"scale_dtype", "torch.uint8"},
                  {"strategy", "group"},  {"symmetric", true},          {"type", "float"},
                  {"zp_dtype", nullptr}};
  json group = {{"format", "mxfp4-pack-quantized"}, {"input_activations", nullptr},
                {"output_activations", nullptr},    {"targets", {"Linear"}},
                {"weights", weights}};
  return {{"config_groups", {{"group_0", group}}},
          {"format", "mxfp4-pack-quantized"},
          {"ignore",
           {"language_model.lm_head", "re:.*self_attn.*", "re:.*mlp\\.(gate|up|down)_proj$",
            "re:.*block_sparse_moe\\.gate$", "re:.*shared_experts.*", "re:.*routed_expert_(down|up)_proj$"}},
          {"kv_cache_scheme", nullptr},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"}};
}

nlohmann::json model_config(const SyntheticShape& s) {
  using json = nlohmann::json;
  const std::vector<int> mla = s.mla_layers.empty() ? default_mla_layers(s.layers) : s.mla_layers;
  std::vector<int> kda;
  for (int id = 1; id <= s.layers; id++)
    if (std::find(mla.begin(), mla.end(), id) == mla.end()) kda.push_back(id);
  std::vector<int> mla_sorted = mla;
  std::sort(mla_sorted.begin(), mla_sorted.end());
  const int first = s.vocab - s.reserved;
  const int bos = first, eos = first + 2, pad = s.vocab - 1;  // [BOS], <|end_of_msg|>, [PAD]

  json text = {
      {"activation_situ_beta", 4.0},
      {"activation_situ_linear_beta", 25.0},
      {"architectures", {"KimiLinearForCausalLM"}},
      {"attn_res_block_size", s.block},
      {"bos_token_id", bos},
      {"dtype", "bfloat16"},
      {"eos_token_id", eos},
      {"first_k_dense_replace", 1},
      {"hidden_act", "situ"},
      {"hidden_size", s.hidden},
      {"intermediate_size", s.dense_inter},
      {"kv_lora_rank", s.kv_lora},
      {"latent_moe_use_norm", true},
      {"linear_attn_config",
       {{"full_attn_layers", mla_sorted},
        {"gate_lower_bound", -5.0},
        {"head_dim", s.kda_head_dim},
        {"kda_layers", kda},
        {"num_heads", s.kda_heads},
        {"short_conv_kernel_size", s.kda_conv_kernel},
        {"use_full_rank_gate", true}}},
      {"max_position_embeddings", s.max_position_embeddings},
      {"mla_use_nope", true},
      {"mla_use_output_gate", true},
      {"model_type", "kimi_linear"},
      {"moe_intermediate_size", s.moe_inter},
      {"moe_layer_freq", 1},
      {"moe_renormalize", true},
      {"moe_router_activation_func", "sigmoid"},
      {"num_attention_heads", s.heads},
      {"num_expert_group", 1},
      {"num_experts", s.experts},
      {"num_experts_per_token", s.top_k},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.heads},
      {"num_nextn_predict_layers", 0},
      {"num_shared_experts", s.shared},
      {"pad_token_id", pad},
      {"q_lora_rank", s.q_lora},
      {"qk_nope_head_dim", s.nope},
      {"qk_rope_head_dim", s.rope},
      {"quantization_config", quantization_config()},
      {"rms_norm_eps", s.rms_norm_eps},
      {"routed_expert_hidden_size", s.latent},
      {"routed_scaling_factor", s.routed_scaling_factor},
      {"tie_word_embeddings", false},
      {"topk_group", 1},
      {"topk_method", "noaux_tc"},
      {"use_cache", true},
      {"use_grouped_topk", true},
      {"v_head_dim", s.v_head},
      {"vocab_size", s.vocab},
  };
  if (s.index_heads > 0)  // docs/k31-spec.md §1.1's canonical keys
    text["dsa_config"] = {{"index_n_heads", s.index_heads},
                          {"index_head_dim", s.index_head_dim},
                          {"index_topk", s.index_topk},
                          {"dsa_layers", mla_sorted}};
  return {{"architectures", {s.index_heads > 0 ? "KimiK31ForConditionalGeneration" : "KimiK3ForConditionalGeneration"}},
          {"bos_token_id", bos},
          {"dtype", "bfloat16"},
          {"eos_token_id", eos},
          {"media_placeholder_token_id", first + 21},  // <|media_pad|>
          {"model_type", "kimi_k3"},
          {"pad_token_id", pad},
          {"text_config", text},
          {"tie_word_embeddings", false}};
}

std::string base64(std::string_view in) {
  static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; k--) out += tbl[(v >> (6 * k)) & 63];
  }
  if (size_t rest = in.size() - i) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16 | (rest == 2 ? uint32_t(uint8_t(in[i + 1])) << 8 : 0);
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += rest == 2 ? tbl[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// "model-NNNNN-of-NNNNN.safetensors", the names shard_file_name() gives.
bool is_shard_file_name(const std::string& name) {
  const std::string pattern = "model-#####-of-#####.safetensors";
  if (name.size() != pattern.size()) return false;
  for (size_t i = 0; i < name.size(); i++)
    if (pattern[i] == '#' ? !(name[i] >= '0' && name[i] <= '9') : name[i] != pattern[i]) return false;
  return true;
}

std::string human_bytes(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", double(n) / 1e9);
  return buf;
}

}  // namespace

// ---- Shapes -----------------------------------------------------------------

SyntheticShape tiny_preset() { return SyntheticShape{}; }

SyntheticShape k3_slice_preset(int layers, int experts) {
  SyntheticShape s;
  s.hidden = 7168;
  s.layers = layers;
  s.heads = 96;
  s.kda_heads = 96;
  s.kda_head_dim = 128;
  s.q_lora = 1536;
  s.kv_lora = 512;
  s.nope = 128;
  s.rope = 64;
  s.v_head = 128;
  s.experts = experts;
  s.top_k = std::min(16, std::max(experts, 1));
  s.moe_inter = 3072;
  s.latent = 3584;
  s.shared = 2;
  s.dense_inter = 33792;
  s.block = 12;
  s.vocab = 163840;
  s.reserved = 256;
  s.shards = layers;
  return s;
}

SyntheticShape k31_tiny_preset() {
  SyntheticShape s = tiny_preset();
  s.index_heads = 4;
  s.index_head_dim = 32;
  s.index_topk = 16;
  return s;
}

SyntheticShape k31_slice_preset(int layers, int experts) {
  SyntheticShape s = k3_slice_preset(layers, experts);
  s.index_heads = 32;
  s.index_head_dim = 128;
  s.index_topk = 2048;
  return s;
}

std::vector<int> default_mla_layers(int layers) {
  std::vector<int> ids;
  for (int id = 4; id <= layers; id += 4) ids.push_back(id);
  if (layers >= 1 && (ids.empty() || ids.back() != layers)) ids.push_back(layers);
  return ids;
}

void validate_shape(const SyntheticShape& s) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) fail(kWhere, what);
  };
  auto positive = [&](int v, const char* name) {
    need(v > 0, std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(s.hidden, "hidden");
  positive(s.layers, "layers");
  positive(s.heads, "heads");
  positive(s.kda_heads, "kda-heads");
  positive(s.kda_head_dim, "kda-head-dim");
  positive(s.kda_conv_kernel, "kda conv kernel");
  positive(s.q_lora, "q-lora");
  positive(s.kv_lora, "kv-lora");
  positive(s.nope, "nope");
  need(s.rope >= 0, "rope must be >= 0, got " + std::to_string(s.rope));
  positive(s.v_head, "v-head");
  positive(s.experts, "experts");
  positive(s.top_k, "top-k");
  positive(s.moe_inter, "moe-inter");
  positive(s.latent, "latent");
  positive(s.shared, "shared");
  positive(s.dense_inter, "dense-inter");
  positive(s.block, "block");
  positive(s.vocab, "vocab");
  positive(s.shards, "shards");
  positive(s.max_position_embeddings, "max_position_embeddings");
  need(s.index_heads >= 0, "index heads must be >= 0");
  if (s.index_heads > 0) {
    positive(s.index_head_dim, "index head dim");
    positive(s.index_topk, "index top-k");
  }
  need(s.top_k <= s.experts,
       "top-k " + std::to_string(s.top_k) + " exceeds experts " + std::to_string(s.experts));
  need(s.latent % kMxfp4Group == 0,
       "latent " + std::to_string(s.latent) + " must be a multiple of 32 (the MXFP4 group)");
  need(s.moe_inter % kMxfp4Group == 0,
       "moe-inter " + std::to_string(s.moe_inter) + " must be a multiple of 32 (the MXFP4 group)");
  need(s.kda_heads <= s.kda_head_dim,
       "kda-heads " + std::to_string(s.kda_heads) + " exceeds kda-head-dim " + std::to_string(s.kda_head_dim) +
           " (A_log is stored [head_dim] with one entry per head)");
  need(s.reserved >= 24,
       "reserved " + std::to_string(s.reserved) + " is too small: K3's named specials need at least 24 ids");
  need(s.vocab - s.reserved >= 256, "vocab " + std::to_string(s.vocab) + " minus reserved " +
                                        std::to_string(s.reserved) + " leaves fewer than the 256 byte tokens");
  need(s.shards <= s.layers,
       "shards " + std::to_string(s.shards) + " exceeds layers " + std::to_string(s.layers));
  need(s.routed_scaling_factor > 0 && std::isfinite(s.routed_scaling_factor),
       "scaling-factor must be a positive number");
  need(s.rms_norm_eps > 0 && s.rms_norm_eps < 1, "rms_norm_eps must be in (0, 1)");
  std::set<int> seen;
  for (int id : s.mla_layers) {
    need(id >= 1 && id <= s.layers, "mla-layers holds " + std::to_string(id) + ", outside the 1-based layers 1.." +
                                        std::to_string(s.layers));
    need(seen.insert(id).second, "mla-layers lists layer " + std::to_string(id) + " twice");
  }
}

std::string reserved_token_name(int offset, int reserved, int id) {
  if (offset == reserved - 1) return "[PAD]";
  if (offset == reserved - 2) return "[UNK]";
  switch (offset) {
    case 0: return "[BOS]";
    case 1: return "[EOS]";
    case 2: return "<|end_of_msg|>";
    case 3: return "<|open|>";
    case 4: return "<|close|>";
    case 5: return "<|sep|>";
    case 6: return "[start_header_id]";
    case 7: return "[end_header_id]";
    case 9: return "[EOT]";
    case 18: return "<|media_begin|>";
    case 19: return "<|media_content|>";
    case 20: return "<|media_end|>";
    case 21: return "<|media_pad|>";
    case 65: return "<osagent_mode>";
  }
  return "<|reserved_token_" + std::to_string(id) + "|>";
}

uint64_t expert_span_bytes(const SyntheticShape& s) {
  uint64_t L = uint64_t(s.latent), I = uint64_t(s.moe_inter);
  // w1, w3: [I, L]; w2: [L, I]; packed = cols/2 bytes per row, scales = cols/32.
  return 2 * (I * L / 2 + I * L / kMxfp4Group) + (L * I / 2 + L * I / kMxfp4Group);
}

uint64_t synthetic_tensor_count(const SyntheticShape& s) {
  const std::vector<int> mla = s.mla_layers.empty() ? default_mla_layers(s.layers) : s.mla_layers;
  uint64_t n = 5;
  for (int l = 0; l < s.layers; l++) {
    bool is_mla = std::find(mla.begin(), mla.end(), l + 1) != mla.end();
    const int indexer = s.index_heads > 0 ? 4 + int(s.index_bias) : 0;
    n += 6 + (is_mla ? 8 + indexer : 14) + (l == 0 ? 3 : 8 + 6 * uint64_t(s.experts));
  }
  return n;
}

// ---- Planning ---------------------------------------------------------------

uint64_t SyntheticModel::tensor_bytes() const {
  uint64_t n = 0;
  for (const ShardPlan& sh : shards) n += sh.layout.data_size;
  return n;
}

uint64_t SyntheticModel::shard_bytes() const {
  uint64_t n = 0;
  for (const ShardPlan& sh : shards) n += sh.layout.file_size();
  return n;
}

SyntheticModel plan_synthetic_model(const SyntheticShape& shape, uint64_t seed) {
  validate_shape(shape);
  SyntheticModel model;
  model.shape = shape;
  if (model.shape.mla_layers.empty()) model.shape.mla_layers = default_mla_layers(shape.layers);
  const SyntheticShape& s = model.shape;
  model.seed = seed;
  model.config = model_config(s);

  // Layers go to shards in contiguous groups (the first L % S groups get one
  // more); the embedding sits with the first group, head and final norms with the last.
  Planner p{s, seed, {}, 0};
  const int S = s.shards;
  int l = 0;
  for (int sh = 0; sh < S; sh++) {
    p.shard = sh;
    if (sh == 0) p.globals_first();
    int count = s.layers / S + (sh < s.layers % S ? 1 : 0);
    for (int k = 0; k < count; k++, l++) {
      bool mla = std::find(s.mla_layers.begin(), s.mla_layers.end(), l + 1) != s.mla_layers.end();
      std::vector<int> rank = l == 0 ? std::vector<int>{}
                                     : shuffled_ranks(s.experts, key_of(seed, "expert order " + std::to_string(l)));
      p.layer(l, mla, rank);
    }
    if (sh == S - 1) p.globals_last();
  }

  model.shards.resize(S);
  std::vector<std::vector<PlannedTensor*>> members(S);
  for (PlannedTensor& t : p.out) members[t.shard].push_back(&t);
  for (int sh = 0; sh < S; sh++) {
    auto& list = members[sh];
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->sort_key < b->sort_key; });
    ShardPlan& plan = model.shards[sh];
    plan.file_name = shard_file_name(sh, S);
    for (PlannedTensor* t : list) plan.tensors.push_back(std::move(t->data));
    plan.layout = layout_safetensors(plan.tensors);
  }
  return model;
}

// ---- Tokenizer files --------------------------------------------------------

std::string make_tiktoken_model(int ranks, uint64_t seed) {
  if (ranks < 256) fail(kWhere, "a byte-level BPE vocabulary needs at least 256 ranks");
  std::vector<std::string> tokens;
  tokens.reserve(size_t(ranks));
  // tiktoken's byte order: the printable bytes first, then the rest, each ascending.
  auto printable = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174); };
  for (int b = 0; b < 256; b++)
    if (printable(b)) tokens.push_back(std::string(1, char(b)));
  for (int b = 0; b < 256; b++)
    if (!printable(b)) tokens.push_back(std::string(1, char(b)));

  // Merges: word-like pieces (an optional leading space, then letters). Each is a
  // lower-ranked stem plus a letter or a short stem, so every token is the
  // concatenation of two earlier ones.
  std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
  std::vector<int> stems;  // ranks usable as the left part
  std::vector<int> tails;  // ranks usable as the right part (no leading space, <= 3 bytes)
  stems.push_back(int(std::find(tokens.begin(), tokens.end(), " ") - tokens.begin()));
  for (char c = 'a'; c <= 'z'; c++) {
    int r = int(std::find(tokens.begin(), tokens.end(), std::string(1, c)) - tokens.begin());
    stems.push_back(r);
    tails.push_back(r);
  }
  SeqRng rng{key_of(seed, "tiktoken merges")};
  while (int(tokens.size()) < ranks) {
    std::string cand = tokens[stems[rng.below(uint32_t(stems.size()))]];
    if (rng.below(4) == 0) cand += tokens[tails[rng.below(uint32_t(tails.size()))]];
    else cand += char('a' + rng.below(26));
    if (cand.size() > 16 || !seen.insert(cand).second) continue;
    stems.push_back(int(tokens.size()));
    if (cand[0] != ' ' && cand.size() <= 3) tails.push_back(int(tokens.size()));
    tokens.push_back(std::move(cand));
  }

  std::string out;
  out.reserve(tokens.size() * 16);
  for (size_t r = 0; r < tokens.size(); r++) out += base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return out;
}

nlohmann::json make_tokenizer_config(const SyntheticShape& s) {
  using json = nlohmann::json;
  const int first = s.vocab - s.reserved;
  json added = json::object();
  for (int k = 0; k < s.reserved; k++) {
    added[std::to_string(first + k)] = {{"content", reserved_token_name(k, s.reserved, first + k)},
                                        {"lstrip", false},
                                        {"normalized", false},
                                        {"rstrip", false},
                                        {"single_word", false},
                                        {"special", true}};
  }
  json extra = json::array();
  for (int k : {2, 3, 4, 5, 6, 7, 9, 18, 19, 20, 21}) extra.push_back(reserved_token_name(k, s.reserved, first + k));
  return {{"added_tokens_decoder", added},
          {"additional_special_tokens", extra},
          {"bos_token", "[BOS]"},
          {"clean_up_tokenization_spaces", false},
          {"eos_token", "[EOS]"},
          {"model_max_length", s.max_position_embeddings},
          {"num_reserved_special_tokens", s.reserved},
          {"pad_token", "[PAD]"},
          {"tokenizer_class", "TikTokenTokenizer"},
          {"unk_token", "[UNK]"}};
}

// ---- Writing ----------------------------------------------------------------

void write_synthetic_model(const SyntheticModel& model, const std::string& dir, const WriteModelOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) fail(dir, "exists and is not a directory");
    if (!fs::is_empty(dir, ec) && !options.overwrite) fail(dir, "is not empty (refusing to overwrite; --force allows it)");
  }
  const SyntheticShape& s = model.shape;
  // Shards, index (~100 bytes per tensor), tokenizer (~40 bytes per id) and slack.
  uint64_t need = model.shard_bytes() + 200 * synthetic_tensor_count(s) + 64 * uint64_t(s.vocab) + (1u << 20);
  uint64_t avail = free_disk_bytes(dir);
  if (need > avail) fail(dir, "needs " + human_bytes(need) + " but only " + human_bytes(avail) + " are free");

  fs::create_directories(dir, ec);
  if (ec) fail(dir, "cannot create directory: " + ec.message());
  if (options.overwrite) {
    // config.json goes first and comes back last, so a half-rewritten
    // directory never looks like a complete checkpoint; stale shards of
    // another shard count go too.
    fs::remove(fs::path(dir) / "config.json", ec);
    for (const auto& entry : fs::directory_iterator(dir))
      if (is_shard_file_name(entry.path().filename().string())) fs::remove(entry.path(), ec);
  }

  std::map<std::string, std::string> weight_map;
  for (const ShardPlan& sh : model.shards) {
    write_safetensors((fs::path(dir) / sh.file_name).string(), sh.tensors, sh.layout);
    for (const TensorData& t : sh.tensors) weight_map[t.name] = sh.file_name;
    if (options.on_file) options.on_file(sh.file_name, sh.layout.file_size());
  }
  auto small = [&](const char* name, const std::string& text) {
    write_file_atomic((fs::path(dir) / name).string(), text);
    if (options.on_file) options.on_file(name, text.size());
  };
  small("model.safetensors.index.json", make_shard_index(weight_map, model.tensor_bytes()).dump(2) + "\n");
  small("tiktoken.model", make_tiktoken_model(s.vocab - s.reserved, model.seed));
  small("tokenizer_config.json", make_tokenizer_config(s).dump(2) + "\n");
  small("config.json", model.config.dump(2) + "\n");
}

}  // namespace sluice
