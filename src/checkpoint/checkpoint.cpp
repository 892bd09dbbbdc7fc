#include "checkpoint/checkpoint.h"
#include "checkpoint/index_json.h"

#include <sys/stat.h>

#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_parse.h"
#include "base/read_file.h"

namespace sluice {

namespace {

constexpr const char* kTextPrefix = "language_model.";

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::vector<std::string> parse_index_json(std::string_view text, const std::string& path,
                                          std::map<std::string, std::string>* weight_map) {
  // Nesting deeper than 4 is never an index.
  const nlohmann::json doc = parse_json(text, path, 4);
  if (!doc.is_object()) fail(path, "not valid JSON: expected an object");
  auto wm = doc.find("weight_map");
  if (wm == doc.end() || !wm->is_object() || wm->empty()) fail(path, "missing or empty 'weight_map'");
  std::vector<std::string> shards;
  std::set<std::string> seen;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) fail(path, "weight_map entry '" + it.key() + "' is not a file name");
    std::string file = it->get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      fail(path, "weight_map entry '" + it.key() + "' names an invalid shard file '" + file + "'");
    (*weight_map)[it.key()] = file;
    if (seen.insert(file).second) shards.push_back(file);
  }
  return shards;
}

namespace {

// K3's index is ~10 MB.
std::vector<std::string> read_index(const std::string& path, std::map<std::string, std::string>* weight_map) {
  return parse_index_json(read_regular_file(path, 256ull << 20), path, weight_map);
}

}  // namespace

ExpertLayout expert_layout(const ModelConfig& c) {
  const uint64_t L = uint64_t(c.routed_expert_hidden_size), I = uint64_t(c.moe_intermediate_size);
  const uint64_t g = uint64_t(c.mxfp4_group_size);
  ExpertLayout e;
  e.w1_packed = 0;
  e.w1_scale = e.w1_packed + I * (L / 2);
  e.w2_packed = e.w1_scale + I * (L / g);
  e.w2_scale = e.w2_packed + L * (I / 2);
  e.w3_packed = e.w2_scale + L * (I / g);
  e.w3_scale = e.w3_packed + I * (L / 2);
  e.total = e.w3_scale + I * (L / g);
  return e;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const TensorInfo& Checkpoint::tensor(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) fail(dir, "missing tensor '" + std::string(kTextPrefix) + name + "'");
  return *t;
}

const TensorInfo& Checkpoint::tensor(const std::string& name, DType dtype,
                                     const std::vector<int64_t>& shape) const {
  const TensorInfo& t = tensor(name);
  const std::string where = shard_paths.at(size_t(t.shard));
  if (t.dtype != dtype)
    fail(where, "tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(dtype));
  if (t.shape != shape)
    fail(where, "tensor '" + t.name + "' has shape " + shape_str(t.shape) + ", expected " + shape_str(shape));
  return t;
}

namespace {

// docs/k3-spec.md §2.2-2.8: the tensors of each kind of layer.
const std::set<std::string> kGlobalTensors = {"model.embed_tokens.weight", "model.norm.weight",
                                              "model.output_attn_res_norm.weight",
                                              "model.output_attn_res_proj.weight", "lm_head.weight"};
const std::set<std::string> kLayerTensors = {"input_layernorm.weight",  "post_attention_layernorm.weight",
                                             "self_attention_res_norm.weight", "self_attention_res_proj.weight",
                                             "mlp_res_norm.weight",     "mlp_res_proj.weight"};
const std::set<std::string> kKdaTensors = {
    "q_proj.weight",   "k_proj.weight",   "v_proj.weight",   "g_proj.weight", "o_proj.weight",
    "f_a_proj.weight", "f_b_proj.weight", "b_proj.weight",   "q_conv1d.weight", "k_conv1d.weight",
    "v_conv1d.weight", "A_log",           "dt_bias",         "o_norm.weight"};
const std::set<std::string> kMlaTensors = {"q_a_proj.weight",           "q_a_layernorm.weight", "q_b_proj.weight",
                                           "kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight", "kv_b_proj.weight",
                                           "g_proj.weight",             "o_proj.weight"};
// docs/k31-spec.md §2.1: K3.1 Pro's lightning indexer, on DSA layers only
// (k_norm.bias optional: k3/weights.cpp requires the rest).
const std::set<std::string> kDsaTensors = {"indexer.wq_b.weight", "indexer.wk.weight", "indexer.weights_proj.weight",
                                           "indexer.k_norm.weight", "indexer.k_norm.bias"};
const std::set<std::string> kDenseTensors = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"};
const std::set<std::string> kMoeTensors = {
    "gate.weight",          "gate.e_score_correction_bias",    "routed_expert_down_proj.weight",
    "routed_expert_norm.weight", "routed_expert_up_proj.weight", "shared_experts.gate_proj.weight",
    "shared_experts.up_proj.weight", "shared_experts.down_proj.weight"};
const std::set<std::string> kExpertParts = {"w1.weight_packed", "w1.weight_scale", "w2.weight_packed",
                                            "w2.weight_scale",  "w3.weight_packed", "w3.weight_scale"};

// The number at the start of `s` followed by '.', and the rest; -1 if none.
int leading_index(const std::string& s, std::string* rest) {
  size_t i = 0;
  while (i < s.size() && i < 9 && s[i] >= '0' && s[i] <= '9') i++;
  if (i == 0 || i >= s.size() || s[i] != '.') return -1;
  *rest = s.substr(i + 1);
  return std::stoi(s.substr(0, i));
}

}  // namespace

bool is_known_tensor(const ModelConfig& c, const std::string& name) {
  if (kGlobalTensors.count(name)) return true;
  std::string rest, part;
  if (!starts_with(name, "model.layers.")) return false;
  const int l = leading_index(name.substr(std::strlen("model.layers.")), &rest);
  if (l < 0 || l >= c.num_hidden_layers) return false;
  if (kLayerTensors.count(rest)) return true;
  if (starts_with(rest, "self_attn.")) {
    const std::string a = rest.substr(std::strlen("self_attn."));
    return (c.is_kda_layer(l) ? kKdaTensors : kMlaTensors).count(a) > 0 || (c.is_dsa_layer(l) && kDsaTensors.count(a));
  }
  if (!c.is_moe_layer(l)) return starts_with(rest, "mlp.") && kDenseTensors.count(rest.substr(std::strlen("mlp.")));
  if (!starts_with(rest, "block_sparse_moe.")) return false;
  rest = rest.substr(std::strlen("block_sparse_moe."));
  if (kMoeTensors.count(rest)) return true;
  if (!starts_with(rest, "experts.")) return false;
  const int e = leading_index(rest.substr(std::strlen("experts.")), &part);
  return e >= 0 && e < c.num_experts && kExpertParts.count(part);
}

std::string ignored_feature_warning(const std::string& dir, const std::string& feature) {
  return dir + ": ignoring unsupported model feature '" + feature +
         "' (--allow-unknown): the engine does not implement it, answers may be wrong";
}

Checkpoint open_checkpoint(const std::string& dir, const CheckpointOptions& options) {
  Checkpoint ck;
  ck.dir = dir;
  ck.config = load_model_config(dir, options.allow_unknown);
  ck.ignored_features = ck.config.ignored_features;
  const ModelConfig& c = ck.config;

  // Shards: through the index, or one model.safetensors.
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> files;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (file_exists(index_path)) {
    files = read_index(index_path, &weight_map);
  } else if (file_exists(dir + "/model.safetensors")) {
    files = {"model.safetensors"};
  } else {
    fail(dir, "no model.safetensors.index.json or model.safetensors");
  }

  for (size_t s = 0; s < files.size(); s++) {
    std::string path = dir + "/" + files[s];
    if (!file_exists(path)) fail(path, "shard listed in the index is missing");
    ShardHeader h = read_safetensors_header(path);
    ck.shard_paths.push_back(path);
    ck.shard_sizes.push_back(h.file_size);
    for (TensorInfo& t : h.tensors) {
      if (!weight_map.empty()) {
        auto wm = weight_map.find(t.name);
        if (wm == weight_map.end()) fail(path, "tensor '" + t.name + "' is not listed in the index");
        if (wm->second != files[s])
          fail(path, "tensor '" + t.name + "' is listed in the index under " + wm->second);
      }
      if (starts_with(t.name, "vision_tower.") || starts_with(t.name, "mm_projector.")) continue;
      std::string key = starts_with(t.name, kTextPrefix) ? t.name.substr(std::strlen(kTextPrefix)) : t.name;
      t.shard = int(s);
      if (!is_known_tensor(c, key)) {
        if (!options.allow_unknown)
          fail(path, unknown_feature_message(t.name, "a tensor the K3 forward pass does not use"));
        ck.ignored_features.push_back("tensor " + t.name);
        continue;
      }
      if (!ck.tensors.emplace(key, t).second) fail(path, "tensor '" + t.name + "' appears in more than one shard");
    }
  }
  for (const auto& [name, file] : weight_map) {
    if (starts_with(name, "vision_tower.") || starts_with(name, "mm_projector.")) continue;
    std::string key = starts_with(name, kTextPrefix) ? name.substr(std::strlen(kTextPrefix)) : name;
    if (!ck.tensors.count(key) && is_known_tensor(c, key))
      fail(dir + "/" + file, "tensor '" + name + "' listed in the index is missing");
  }

  // Expert span index: six tensors per expert, contiguous and in order. The
  // config's counts are checked against the files before the index is sized.
  const uint64_t moe_layers = uint64_t(c.num_hidden_layers - std::min(c.first_k_dense_replace, c.num_hidden_layers));
  if (moe_layers * uint64_t(c.num_experts) * 6 > ck.tensors.size())
    fail(dir + "/config.json", std::to_string(moe_layers) + " MoE layers x " + std::to_string(c.num_experts) +
                                   " experts need " + std::to_string(moe_layers * uint64_t(c.num_experts) * 6) +
                                   " expert tensors; the checkpoint holds " + std::to_string(ck.tensors.size()) +
                                   " tensors in all");
  const ExpertLayout lay = expert_layout(c);
  const int64_t L = c.routed_expert_hidden_size, I = c.moe_intermediate_size, g = c.mxfp4_group_size;
  struct Part {
    const char* suffix;
    uint64_t rel;
    std::vector<int64_t> shape;
  };
  const Part parts[6] = {
      {"w1.weight_packed", lay.w1_packed, {I, L / 2}}, {"w1.weight_scale", lay.w1_scale, {I, L / g}},
      {"w2.weight_packed", lay.w2_packed, {L, I / 2}}, {"w2.weight_scale", lay.w2_scale, {L, I / g}},
      {"w3.weight_packed", lay.w3_packed, {I, L / 2}}, {"w3.weight_scale", lay.w3_scale, {I, L / g}},
  };
  ck.experts.resize(size_t(c.num_hidden_layers));
  for (int l = 0; l < c.num_hidden_layers; l++) {
    if (!c.is_moe_layer(l)) continue;
    ck.experts[l].resize(size_t(c.num_experts));
    for (int e = 0; e < c.num_experts; e++) {
      std::string base = "model.layers." + std::to_string(l) + ".block_sparse_moe.experts." + std::to_string(e) + ".";
      FileSpan span;
      for (const Part& p : parts) {
        const TensorInfo& t = ck.tensor(base + p.suffix, DType::U8, p.shape);
        if (span.file < 0) {
          span.file = t.shard;
          span.offset = t.offset;
        }
        if (t.shard != span.file || t.offset != span.offset + p.rel)
          fail(ck.shard_paths[size_t(t.shard)],
               "expert " + std::to_string(e) + " of layer " + std::to_string(l) +
                   " is not contiguous: '" + t.name + "' is not where the expert layout puts it "
                   "(w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale back to back)");
      }
      span.length = lay.total;
      ck.experts[l][e] = span;
    }
  }
  return ck;
}

}  // namespace sluice
