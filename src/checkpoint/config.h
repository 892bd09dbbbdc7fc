// checkpoint/config.h — the model description read from config.json.
//
// K3 ships a multimodal wrapper (model_type "kimi_k3") whose text model sits in
// "text_config" (model_type "kimi_linear"); a flat text config is accepted too.
// Every field the forward pass needs is read and validated strictly: a missing
// field, a wrong type, an inconsistent layer schedule or an unsupported option
// is an error naming config.json and the field. Any internally consistent
// dimensions load (tests use tiny ones); the real K3 shape is recognised.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice {

enum class LayerKind { KDA, MLA };

struct ModelConfig {
  // Vocabulary and special ids.
  int vocab_size = 0;
  int bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;

  // Trunk.
  int hidden_size = 0;
  int num_hidden_layers = 0;
  float rms_norm_eps = 1e-5f;
  int attn_res_block_size = 0;  // AttnRes blocks are sealed when l % block == 0
  int max_position_embeddings = 0;

  // SiTU activation.
  float situ_beta = 4.0f;
  float situ_linear_beta = 25.0f;

  // Dense FFN (layers < first_k_dense_replace).
  int intermediate_size = 0;
  int first_k_dense_replace = 1;

  // MLA (gated, NoPE).
  int num_attention_heads = 0;
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;  // present in the weights, never rotated
  int v_head_dim = 0;
  float mla_latent_norm_eps = 1e-5f;  // q_a/kv_a layernorm ε (spec §9.2: fixtures use rms_norm_eps)

  // KDA (linear attention).
  int kda_num_heads = 0;
  int kda_head_dim = 0;
  int kda_conv_kernel = 0;
  float kda_gate_lower_bound = -5.0f;

  // Latent MoE.
  int num_experts = 0;
  int num_experts_per_token = 0;
  int num_shared_experts = 0;
  int moe_intermediate_size = 0;     // per routed expert, and per shared expert
  int routed_expert_hidden_size = 0;  // latent width the routed experts compute in
  float routed_scaling_factor = 1.0f;

  // MXFP4 group size of the routed experts (compressed-tensors).
  int mxfp4_group_size = 32;

  // Per layer (0-based): attention kind. Read from the config's two lists.
  std::vector<LayerKind> layer_kind;

  // K3.1 Pro's sparse attention (docs/k31-spec.md §1): on iff the config has a
  // non-null `dsa_config`; then each listed MLA layer carries a lightning
  // indexer of dsa_n_heads x dsa_head_dim that keeps the dsa_topk best causal
  // positions per query. dsa_k_norm_eps: the indexer key LayerNorm's ε (§4.2).
  bool dsa = false;
  int dsa_n_heads = 0, dsa_head_dim = 0, dsa_topk = 0;
  float dsa_k_norm_eps = 1e-5f;
  std::vector<bool> dsa_layer;  // per layer (0-based); empty when !dsa

  // What the config asks for that the engine does not implement, ignored
  // because the caller allowed unknown features (otherwise they are refused):
  // "text_config.dsa_config", ...
  std::vector<std::string> ignored_features;

  // Derived helpers.
  bool is_moe_layer(int l) const { return l >= first_k_dense_replace; }
  bool is_kda_layer(int l) const { return layer_kind[l] == LayerKind::KDA; }
  bool is_dsa_layer(int l) const { return dsa && dsa_layer[size_t(l)]; }
  int dsa_layer_count() const;
  int kda_dim() const { return kda_num_heads * kda_head_dim; }
  // One KDA layer's recurrent state S: a head_dim x head_dim matrix a head.
  uint64_t kda_state_floats() const { return uint64_t(kda_num_heads) * kda_head_dim * kda_head_dim; }
  int mla_q_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int shared_intermediate() const { return num_shared_experts * moe_intermediate_size; }
  // Bytes one position adds to a sequence's state: every MLA layer's latent
  // cache row, plus its indexer key on a DSA layer (docs/k31-spec.md §5).
  uint64_t cache_bytes_per_position() const;
  // Bytes of one routed expert's six tensors (w1, w2, w3 packed + scales).
  uint64_t expert_span_bytes() const;
};

// Parses a config.json document. `where` names the file in error messages.
// Every key is checked against an allow-list of what the K3 text path reads
// or knows to be harmless (metadata, the vision tower's settings, training
// knobs); any other key with a non-null value may ask for computation the
// engine lacks (`index_topk` at the top level, a key inside `dsa_config` it
// does not know, ...) and is refused by name: "unsupported model feature 'x' (...)".
// allow_unknown: it is recorded in ignored_features instead.
ModelConfig parse_model_config(const nlohmann::json& doc, const std::string& where, bool allow_unknown = false);
// Reads and parses DIR/config.json.
ModelConfig load_model_config(const std::string& model_dir, bool allow_unknown = false);

// The message refusing an unknown feature `what` (a config key, a tensor).
std::string unknown_feature_message(const std::string& what, const std::string& detail);

}  // namespace sluice
