#include "checkpoint/config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/json_parse.h"
#include "base/read_file.h"

namespace sluice {

namespace {

using json = nlohmann::json;

// Bounds on what a config may claim, far above any real model (K3: hidden
// 7168, 93 layers, 896 experts) and low enough that the size helpers' products
// fit an int and nothing is allocated from an absurd number before the files
// are checked against it.
constexpr int kMaxDim = 1 << 20;
constexpr int kMaxLayers = 4096;
constexpr int kMaxExperts = 1 << 16;
constexpr int64_t kMaxProduct = int64_t(1) << 30;
constexpr uint64_t kMaxConfigBytes = 16ull << 20;

// Field readers: each names the config file and the field when something is off.
struct Reader {
  const json& obj;
  std::string where;   // file name
  std::string prefix;  // e.g. "text_config."

  const json& get(const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) fail(where, "missing field '" + prefix + key + "'");
    return *it;
  }
  bool has(const char* key) const {
    auto it = obj.find(key);
    return it != obj.end() && !it->is_null();
  }
  int integer(const char* key) const {
    const json& v = get(key);
    if (!v.is_number_integer()) fail(where, "field '" + prefix + key + "' must be an integer");
    int64_t x = v.get<int64_t>();
    if (x < INT32_MIN || x > INT32_MAX) fail(where, "field '" + prefix + key + "' is out of range");
    return int(x);
  }
  int positive(const char* key, int max = kMaxDim) const {
    int x = integer(key);
    if (x <= 0) fail(where, "field '" + prefix + key + "' must be positive, got " + std::to_string(x));
    if (x > max)
      fail(where, "field '" + prefix + key + "' = " + std::to_string(x) + " is implausibly large (at most " +
                      std::to_string(max) + ")");
    return x;
  }
  float number(const char* key) const {
    const json& v = get(key);
    if (!v.is_number()) fail(where, "field '" + prefix + key + "' must be a number");
    return v.get<float>();
  }
  float number_or(const char* key, float dflt) const { return has(key) ? number(key) : dflt; }
  bool boolean(const char* key) const {
    const json& v = get(key);
    if (!v.is_boolean()) fail(where, "field '" + prefix + key + "' must be true or false");
    return v.get<bool>();
  }
  std::string string(const char* key) const {
    const json& v = get(key);
    if (!v.is_string()) fail(where, "field '" + prefix + key + "' must be a string");
    return v.get<std::string>();
  }
  std::vector<int> int_list(const char* key) const {
    const json& v = get(key);
    if (!v.is_array()) fail(where, "field '" + prefix + key + "' must be a list of integers");
    std::vector<int> out;
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(where, "field '" + prefix + key + "' must be a list of integers");
      // Read wide: 2^32 + 1 must not wrap to 1.
      const int64_t x = e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX
                                                                                          : e.get<int64_t>();
      if (x < INT32_MIN || x > INT32_MAX)
        fail(where, "field '" + prefix + key + "' holds " + e.dump() + ", out of range");
      out.push_back(int(x));
    }
    return out;
  }
  Reader sub(const char* key) const {
    const json& v = get(key);
    if (!v.is_object()) fail(where, "field '" + prefix + key + "' must be an object");
    return Reader{v, where, prefix + key + "."};
  }
  void expect(bool ok, const std::string& what) const {
    if (!ok) fail(where, what);
  }
};

// The keys each object of a K3 config may hold (docs/k3-spec.md §1.1-1.3,
// plus what Hugging Face writes into every config). A key outside its list
// may change the computation (a new attention mechanism, an extra head), so
// it is refused unless the caller allows unknown features; a null value
// asks for nothing and passes.
const std::set<std::string> kMetadataKeys = {
    "architectures", "auto_map", "model_type", "dtype", "torch_dtype", "transformers_version", "_name_or_path",
    "use_cache", "initializer_range", "attention_dropout", "hidden_dropout", "output_attentions",
    "output_hidden_states", "return_dict", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings",
    // The engine applies no positional encoding (mla_use_nope must be true): RoPE settings change nothing.
    "rope_theta", "rope_scaling"};
const std::set<std::string> kWrapperKeys = {"text_config", "vision_config", "media_placeholder_token_id",
                                            "quantization_config"};
const std::set<std::string> kTextKeys = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "moe_intermediate_size", "routed_expert_hidden_size", "num_experts", "num_experts_per_token",
    "num_shared_experts", "first_k_dense_replace", "moe_layer_freq", "moe_router_activation_func", "topk_method",
    "use_grouped_topk", "num_expert_group", "topk_group", "moe_renormalize", "routed_scaling_factor",
    "latent_moe_use_norm", "hidden_act", "activation_situ_beta", "activation_situ_linear_beta", "rms_norm_eps",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mla_use_nope",
    "mla_use_output_gate", "attn_res_block_size", "max_position_embeddings", "num_nextn_predict_layers",
    "linear_attn_config", "quantization_config", "dsa_config"};
const std::set<std::string> kLinearAttnKeys = {"num_heads",        "head_dim",           "short_conv_kernel_size",
                                               "gate_lower_bound", "use_full_rank_gate", "kda_layers",
                                               "full_attn_layers"};
// docs/k31-spec.md §1.1: the canonical names (the real ones are [U]; a
// different name stops the load, naming it).
const std::set<std::string> kDsaKeys = {"index_n_heads", "index_head_dim", "index_topk", "dsa_layers"};
const std::set<std::string> kQuantKeys = {"quant_method", "format", "quantization_status", "config_groups", "ignore",
                                          "kv_cache_scheme", "sparsity_config", "global_compression_ratio", "version"};
const std::set<std::string> kQuantGroupKeys = {"format", "targets", "input_activations", "output_activations",
                                               "weights"};
const std::set<std::string> kQuantWeightKeys = {"num_bits",  "type",        "group_size", "strategy",
                                                "symmetric", "dynamic",     "observer",   "observer_kwargs",
                                                "scale_dtype", "zp_dtype", "actorder",   "block_structure"};

// Refuses (or, allowed, records) the keys of r's object outside `known` (and
// outside the metadata list when `metadata`).
void check_keys(const Reader& r, const std::set<std::string>& known, bool metadata, bool allow_unknown,
                ModelConfig& c) {
  for (auto it = r.obj.begin(); it != r.obj.end(); ++it) {
    if (it->is_null() || known.count(it.key()) || (metadata && kMetadataKeys.count(it.key()))) continue;
    const std::string name = r.prefix + it.key();
    if (!allow_unknown)
      fail(r.where, unknown_feature_message(it.key(), name + " is not part of the model sluice implements"));
    c.ignored_features.push_back(name);
  }
}

void check_quantization(const Reader& q, ModelConfig& c, bool allow_unknown) {
  check_keys(q, kQuantKeys, false, allow_unknown, c);
  for (const char* k : {"kv_cache_scheme", "sparsity_config"}) {
    if (!q.has(k)) continue;
    if (!allow_unknown)
      fail(q.where, unknown_feature_message(k, q.prefix + k + " must be null (sluice keeps exact caches and dense weights)"));
    c.ignored_features.push_back(q.prefix + k);
  }
  std::string method = q.string("quant_method");
  q.expect(method == "compressed-tensors",
           "unsupported quantization_config.quant_method '" + method + "' (expected compressed-tensors)");
  std::string format = q.string("format");
  q.expect(format == "mxfp4-pack-quantized",
           "unsupported quantization_config.format '" + format + "' (expected mxfp4-pack-quantized)");
  // The group size comes from the first config group that quantizes weights.
  if (q.has("config_groups")) {
    Reader groups = q.sub("config_groups");
    for (auto it = groups.obj.begin(); it != groups.obj.end(); ++it) {
      if (!it->is_object()) continue;
      check_keys(Reader{*it, q.where, groups.prefix + it.key() + "."}, kQuantGroupKeys, false, allow_unknown, c);
      auto w = it->find("weights");
      if (w == it->end() || !w->is_object()) continue;
      Reader wr{*w, q.where, groups.prefix + it.key() + ".weights."};
      check_keys(wr, kQuantWeightKeys, false, allow_unknown, c);
      int bits = wr.integer("num_bits");
      wr.expect(bits == 4, "unsupported " + wr.prefix + "num_bits " + std::to_string(bits) + " (MXFP4 has 4)");
      std::string type = wr.string("type");
      wr.expect(type == "float", "unsupported " + wr.prefix + "type '" + type + "' (MXFP4 is float)");
      c.mxfp4_group_size = wr.positive("group_size");
      wr.expect(c.mxfp4_group_size == 32,
                "unsupported " + wr.prefix + "group_size " + std::to_string(c.mxfp4_group_size) +
                    " (MXFP4 blocks are 32)");
      for (const char* k : {"input_activations", "output_activations"})
        if (it->contains(k) && !(*it)[k].is_null())
          q.expect(false, std::string("quantized activations are not supported (") + groups.prefix + it.key() + "." +
                              k + " must be null)");
    }
  }
}

}  // namespace

std::string unknown_feature_message(const std::string& what, const std::string& detail) {
  return "unsupported model feature '" + what + "' (" + detail +
         "; the answers would be wrong without it: --allow-unknown runs anyway, with a warning)";
}

uint64_t ModelConfig::expert_span_bytes() const {
  uint64_t L = uint64_t(routed_expert_hidden_size), I = uint64_t(moe_intermediate_size);
  uint64_t g = uint64_t(mxfp4_group_size);
  // w1, w3: [I, L]; w2: [L, I]; each packed (cols/2 bytes per row) + scales (cols/g per row).
  return 2 * (I * (L / 2) + I * (L / g)) + (L * (I / 2) + L * (I / g));
}

namespace {

// The architecture names in `architectures`, if any (docs/k31-spec.md §1.2).
bool names_architecture(const Reader& root, const std::string& name) {
  if (!root.has("architectures") || !root.obj["architectures"].is_array()) return false;
  for (const json& a : root.obj["architectures"])
    if (a.is_string() && a.get<std::string>() == name) return true;
  return false;
}

// K3.1 Pro's `dsa_config` (docs/k31-spec.md §1.1-1.2) into c, after the layer schedule.
void parse_dsa(const Reader& root, const Reader& t, ModelConfig& c, bool allow_unknown) {
  const char* k31 = "KimiK31ForConditionalGeneration";
  const char* k3 = "KimiK3ForConditionalGeneration";
  if (!t.has("dsa_config")) {
    root.expect(!names_architecture(root, k31), std::string("architectures names ") + k31 + " but " + t.prefix +
                                                    "dsa_config is missing");
    return;
  }
  root.expect(!names_architecture(root, k3), std::string("architectures names ") + k3 + " but the config has " +
                                                 t.prefix + "dsa_config (a K3.1 Pro field)");
  const Reader d = t.sub("dsa_config");
  check_keys(d, kDsaKeys, false, allow_unknown, c);
  c.dsa = true;
  c.dsa_n_heads = d.positive("index_n_heads");
  c.dsa_head_dim = d.positive("index_head_dim");
  c.dsa_topk = d.positive("index_topk", INT32_MAX);
  c.dsa_k_norm_eps = c.rms_norm_eps;  // §4.2: dsa_config declares no ε
  c.dsa_layer.assign(size_t(c.num_hidden_layers), false);
  for (int l = 0; l < c.num_hidden_layers; l++) c.dsa_layer[size_t(l)] = !c.is_kda_layer(l);
  if (!d.has("dsa_layers")) return;  // absent: every full-attention layer
  std::vector<bool> listed(size_t(c.num_hidden_layers), false);
  for (int id : d.int_list("dsa_layers")) {
    d.expect(id >= 1 && id <= c.num_hidden_layers, "field '" + d.prefix + "dsa_layers' holds layer " +
                                                       std::to_string(id) + " outside 1.." +
                                                       std::to_string(c.num_hidden_layers));
    d.expect(!c.is_kda_layer(id - 1), "field '" + d.prefix + "dsa_layers' holds layer " + std::to_string(id) +
                                          ", which is not a full-attention layer");
    listed[size_t(id - 1)] = true;
  }
  d.expect(listed == c.dsa_layer, "field '" + d.prefix + "dsa_layers' must list every full-attention layer");
}

// MLA's fields (spec §3.4).
void read_mla(const Reader& t, ModelConfig& c) {
  c.num_attention_heads = t.positive("num_attention_heads");
  if (t.has("num_key_value_heads"))
    t.expect(t.integer("num_key_value_heads") == c.num_attention_heads,
             "num_key_value_heads must equal num_attention_heads (MLA has no GQA)");
  c.q_lora_rank = t.positive("q_lora_rank");
  c.kv_lora_rank = t.positive("kv_lora_rank");
  c.qk_nope_head_dim = t.positive("qk_nope_head_dim");
  c.qk_rope_head_dim = t.integer("qk_rope_head_dim");
  t.expect(c.qk_rope_head_dim >= 0 && c.qk_rope_head_dim <= kMaxDim,
           "field '" + t.prefix + "qk_rope_head_dim' must be in [0, " + std::to_string(kMaxDim) + "]");
  c.v_head_dim = t.positive("v_head_dim");
  if (t.has("mla_use_nope"))
    t.expect(t.boolean("mla_use_nope"), "unsupported mla_use_nope = false (K3 applies no RoPE)");
  if (t.has("mla_use_output_gate"))
    t.expect(t.boolean("mla_use_output_gate"), "unsupported mla_use_output_gate = false");
}

// KDA's fields (linear_attn_config) and the layer schedule: two 1-based lists
// that must partition 1..L.
void read_kda_and_schedule(const Reader& t, ModelConfig& c, const std::string& where, bool allow_unknown) {
  Reader la = t.sub("linear_attn_config");
  check_keys(la, kLinearAttnKeys, false, allow_unknown, c);
  c.kda_num_heads = la.positive("num_heads");
  c.kda_head_dim = la.positive("head_dim");
  c.kda_conv_kernel = la.positive("short_conv_kernel_size");
  c.kda_gate_lower_bound = la.number("gate_lower_bound");
  la.expect(c.kda_gate_lower_bound < 0, "field '" + la.prefix + "gate_lower_bound' must be negative");
  if (la.has("use_full_rank_gate"))
    la.expect(la.boolean("use_full_rank_gate"), "unsupported use_full_rank_gate = false");

  std::vector<int> kda = la.int_list("kda_layers"), mla = la.int_list("full_attn_layers");
  c.layer_kind.assign(c.num_hidden_layers, LayerKind::KDA);
  std::vector<int> seen(c.num_hidden_layers, 0);
  for (auto [list, kind, name] : {std::tuple{&kda, LayerKind::KDA, "kda_layers"},
                                  std::tuple{&mla, LayerKind::MLA, "full_attn_layers"}}) {
    for (int id : *list) {
      if (id < 1 || id > c.num_hidden_layers)
        fail(where, "inconsistent schedule: " + la.prefix + name + " holds layer " + std::to_string(id) +
                        " outside 1.." + std::to_string(c.num_hidden_layers));
      if (seen[id - 1]++)
        fail(where, "inconsistent schedule: layer " + std::to_string(id) + " is listed twice");
      c.layer_kind[id - 1] = kind;
    }
  }
  for (int l = 0; l < c.num_hidden_layers; l++)
    if (!seen[l])
      fail(where, "inconsistent schedule: layer " + std::to_string(l + 1) +
                      " is in neither kda_layers nor full_attn_layers");
}

// The MoE fields, required when any layer is MoE; the quantization config
// from the text config or the root.
void read_moe(const Reader& root, const Reader& t, ModelConfig& c, bool allow_unknown) {
  bool any_moe = c.first_k_dense_replace < c.num_hidden_layers;
  c.num_experts = t.has("num_experts") ? t.integer("num_experts") : 0;
  c.num_experts_per_token = t.has("num_experts_per_token") ? t.integer("num_experts_per_token") : 0;
  t.expect(c.num_experts >= 0 && c.num_experts <= kMaxExperts && c.num_experts_per_token >= 0 &&
               c.num_experts_per_token <= kMaxExperts,
           "num_experts and num_experts_per_token must be in [0, " + std::to_string(kMaxExperts) + "]");
  if (any_moe) {
    c.num_experts = t.positive("num_experts", kMaxExperts);
    c.num_experts_per_token = t.positive("num_experts_per_token");
    t.expect(c.num_experts_per_token <= c.num_experts, "num_experts_per_token exceeds num_experts");
    c.num_shared_experts = t.integer("num_shared_experts");
    t.expect(c.num_shared_experts >= 0 && c.num_shared_experts <= kMaxExperts,
             "field '" + t.prefix + "num_shared_experts' must be in [0, " + std::to_string(kMaxExperts) + "]");
    c.moe_intermediate_size = t.positive("moe_intermediate_size");
    c.routed_expert_hidden_size = t.positive("routed_expert_hidden_size");
    c.routed_scaling_factor = t.number_or("routed_scaling_factor", 1.0f);
    if (t.has("moe_router_activation_func")) {
      std::string f = t.string("moe_router_activation_func");
      t.expect(f == "sigmoid", "unsupported moe_router_activation_func '" + f + "' (only sigmoid)");
    }
    if (t.has("topk_method")) {
      std::string m = t.string("topk_method");
      t.expect(m == "noaux_tc", "unsupported topk_method '" + m + "' (only noaux_tc)");
    }
    if (t.has("num_expert_group"))
      t.expect(t.integer("num_expert_group") == 1, "unsupported num_expert_group (only 1)");
    if (t.has("topk_group")) t.expect(t.integer("topk_group") == 1, "unsupported topk_group (only 1)");
    if (t.has("moe_renormalize")) t.expect(t.boolean("moe_renormalize"), "unsupported moe_renormalize = false");
    if (t.has("latent_moe_use_norm"))
      t.expect(t.boolean("latent_moe_use_norm"), "unsupported latent_moe_use_norm = false");
    if (t.has("quantization_config")) check_quantization(t.sub("quantization_config"), c, allow_unknown);
    else if (root.has("quantization_config")) check_quantization(root.sub("quantization_config"), c, allow_unknown);
    t.expect(c.routed_expert_hidden_size % c.mxfp4_group_size == 0 &&
                 c.moe_intermediate_size % c.mxfp4_group_size == 0,
             "routed_expert_hidden_size and moe_intermediate_size must be multiples of the MXFP4 group (32)");
  }
}

// The size helpers multiply fields; each product must fit an int (and
// describe a matrix a machine could hold).
void check_products(const ModelConfig& c, const std::string& where) {
  for (auto [what, v] : {std::pair{"num_heads x head_dim (KDA)", int64_t(c.kda_num_heads) * c.kda_head_dim},
                         std::pair{"num_attention_heads x q head dim (MLA)",
                                   int64_t(c.num_attention_heads) * (int64_t(c.qk_nope_head_dim) + c.qk_rope_head_dim)},
                         std::pair{"num_attention_heads x v_head_dim", int64_t(c.num_attention_heads) * c.v_head_dim},
                         std::pair{"num_shared_experts x moe_intermediate_size",
                                   int64_t(c.num_shared_experts) * c.moe_intermediate_size},
                         std::pair{"num_hidden_layers x num_experts", int64_t(c.num_hidden_layers) * c.num_experts},
                         std::pair{"index_n_heads x index_head_dim", int64_t(c.dsa_n_heads) * c.dsa_head_dim},
                         std::pair{"index_n_heads x index_head_dim x q_lora_rank",
                                   int64_t(c.dsa_n_heads) * c.dsa_head_dim * c.q_lora_rank}})
    if (v > kMaxProduct) fail(where, std::string(what) + " = " + std::to_string(v) + " is implausibly large");
}

}  // namespace

uint64_t ModelConfig::cache_bytes_per_position() const {
  uint64_t b = 0;
  for (int l = 0; l < num_hidden_layers; l++) {
    if (is_kda_layer(l)) continue;
    b += uint64_t(kv_lora_rank + qk_rope_head_dim) * sizeof(float);
    if (is_dsa_layer(l)) b += uint64_t(dsa_head_dim) * sizeof(float);
  }
  return b;
}

int ModelConfig::dsa_layer_count() const {
  int n = 0;
  for (int l = 0; l < num_hidden_layers; l++) n += is_dsa_layer(l);
  return n;
}

ModelConfig parse_model_config(const json& doc, const std::string& where, bool allow_unknown) {
  if (!doc.is_object()) fail(where, "config must be a JSON object");
  Reader root{doc, where, ""};
  const Reader t = [&] {
    if (!root.has("text_config")) return root;
    std::string mt = root.has("model_type") ? root.string("model_type") : "";
    root.expect(mt == "kimi_k3" || mt == "kimi_k31",
                "model_type '" + mt + "' with a text_config is not supported (expected kimi_k3 or kimi_k31)");
    return root.sub("text_config");
  }();
  std::string mt = t.string("model_type");
  t.expect(mt == "kimi_linear" || mt == "kimi_k3",
           "unsupported " + t.prefix + "model_type '" + mt + "' (expected kimi_linear)");

  ModelConfig c;
  if (&t.obj != &root.obj) {
    check_keys(root, kWrapperKeys, true, allow_unknown, c);
    check_keys(t, kTextKeys, true, allow_unknown, c);
  } else {
    std::set<std::string> flat = kTextKeys;  // a flat text config may carry the wrapper's media id too
    flat.insert("media_placeholder_token_id");
    check_keys(t, flat, true, allow_unknown, c);
  }
  c.vocab_size = t.positive("vocab_size");
  c.hidden_size = t.positive("hidden_size");
  c.num_hidden_layers = t.positive("num_hidden_layers", kMaxLayers);
  c.rms_norm_eps = t.number("rms_norm_eps");
  t.expect(c.rms_norm_eps > 0 && c.rms_norm_eps < 1, "field '" + t.prefix + "rms_norm_eps' must be in (0, 1)");
  c.mla_latent_norm_eps = c.rms_norm_eps;
  c.attn_res_block_size = t.positive("attn_res_block_size");
  c.max_position_embeddings = t.has("max_position_embeddings") ? t.positive("max_position_embeddings") : 0;
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    int v = t.has(k) ? t.integer(k) : root.has(k) ? root.integer(k) : -1;
    if (v >= c.vocab_size) fail(where, std::string("field '") + t.prefix + k + "' is outside the vocabulary");
    if (root.has(k) && t.has(k) && root.integer(k) != t.integer(k))
      fail(where, std::string("field '") + k + "' differs between the root and text_config");
    (k[0] == 'b' ? c.bos_token_id : k[0] == 'e' ? c.eos_token_id : c.pad_token_id) = v;
  }

  std::string act = t.string("hidden_act");
  t.expect(act == "situ", "unsupported " + t.prefix + "hidden_act '" + act + "' (only situ)");
  c.situ_beta = t.number_or("activation_situ_beta", 4.0f);
  c.situ_linear_beta = t.number_or("activation_situ_linear_beta", 25.0f);
  t.expect(c.situ_beta > 0 && c.situ_linear_beta > 0, "SiTU betas must be positive");

  c.intermediate_size = t.positive("intermediate_size");
  c.first_k_dense_replace = t.integer("first_k_dense_replace");
  t.expect(c.first_k_dense_replace >= 0 && c.first_k_dense_replace <= c.num_hidden_layers,
           "field '" + t.prefix + "first_k_dense_replace' must be in [0, num_hidden_layers]");
  if (t.has("moe_layer_freq"))
    t.expect(t.integer("moe_layer_freq") == 1, "unsupported " + t.prefix + "moe_layer_freq (only 1)");

  read_mla(t, c);
  read_kda_and_schedule(t, c, where, allow_unknown);
  parse_dsa(root, t, c, allow_unknown);
  read_moe(root, t, c, allow_unknown);
  check_products(c, where);
  if (t.has("num_nextn_predict_layers"))
    t.expect(t.integer("num_nextn_predict_layers") == 0, "MTP heads (num_nextn_predict_layers > 0) are not supported");
  if (t.has("tie_word_embeddings"))
    t.expect(!t.boolean("tie_word_embeddings"), "tied word embeddings are not supported (K3 does not tie)");
  return c;
}

ModelConfig load_model_config(const std::string& model_dir, bool allow_unknown) {
  std::string path = model_dir + "/config.json";
  return parse_model_config(parse_json(read_regular_file(path, kMaxConfigBytes), path), path, allow_unknown);
}

}  // namespace sluice
