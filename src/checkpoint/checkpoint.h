// checkpoint/checkpoint.h — an opened checkpoint: config, shards, tensor
// inventory and the expert span index.
//
// Opening reads only headers (config.json, the index, each shard's safetensors
// header); no weight byte is read here. Tensor names are stored without the
// "language_model." prefix; vision tensors are skipped. For each routed expert
// (layer, e) the span index gives the one contiguous byte range holding its six
// tensors, in the order w1.packed, w1.scale, w2.packed, w2.scale, w3.packed,
// w3.scale; offsets always come from the headers, never from base + e*span.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/safetensors.h"

namespace sluice {

// Offsets of the six parts inside one expert span (relative to the span start).
struct ExpertLayout {
  uint64_t w1_packed = 0, w1_scale = 0, w2_packed = 0, w2_scale = 0, w3_packed = 0,
           w3_scale = 0, total = 0;
};
ExpertLayout expert_layout(const ModelConfig& c);

struct CheckpointOptions {
  // Open a checkpoint whose config keys or tensors the engine does not
  // implement (each is recorded in ignored_features, not refused).
  bool allow_unknown = false;
};

struct Checkpoint {
  std::string dir;
  ModelConfig config;
  std::vector<std::string> shard_paths;  // absolute or dir-relative paths, index order
  std::vector<uint64_t> shard_sizes;
  std::unordered_map<std::string, TensorInfo> tensors;  // key: name without "language_model."
  std::vector<std::vector<FileSpan>> experts;          // [layer][expert]; empty for dense layers
  // allow_unknown: the config keys (config.ignored_features) and tensors the
  // engine does not implement and will not use; the caller warns about them.
  std::vector<std::string> ignored_features;

  // The tensor called `name` (prefix-free); throws naming the checkpoint if absent.
  const TensorInfo& tensor(const std::string& name) const;
  const TensorInfo* find(const std::string& name) const;
  // Checks dtype and shape; throws naming the tensor and what differs.
  const TensorInfo& tensor(const std::string& name, DType dtype,
                           const std::vector<int64_t>& shape) const;
};

// Opens DIR: config.json, then model.safetensors.index.json (or a single
// model.safetensors), every shard header, the inventory and the span index.
// Every problem is an Error naming the file and what is wrong; so is a config
// key (checkpoint/config.h) or a text tensor the K3 forward pass does not use
// (an indexer's weights, an MTP head), unless options.allow_unknown.
Checkpoint open_checkpoint(const std::string& dir, const CheckpointOptions& options = {});

// "DIR: ignoring 'text_config.dsa_config', which sluice does not implement (...)".
std::string ignored_feature_warning(const std::string& dir, const std::string& feature);

// True when the forward pass of config `c` uses the text tensor `name`
// (prefix-free: "model.layers.3.self_attn.q_a_proj.weight").
bool is_known_tensor(const ModelConfig& c, const std::string& name);

}  // namespace sluice
