// checkpoint/synthetic_model.h — seeded synthetic K3 checkpoints in the real
// Hugging Face layout (what `sluice make-model` writes).
//
// The output mirrors K3 file for file: config.json (model_type kimi_k3 with a
// nested kimi_linear text_config and its quantization_config), shards
// model-NNNNN-of-NNNNN.safetensors + model.safetensors.index.json with every
// tensor under "language_model.", F32 where K3 has F32, BF16 elsewhere, MXFP4
// routed experts whose six tensors are contiguous and whose experts form one
// run per layer in a shuffled order, and a tiktoken.model +
// tokenizer_config.json with K3's reserved-token scheme at the top of the vocab.
//
// Bytes come from a counter-based PRNG keyed by (seed, tensor name, position),
// so the same seed gives byte-identical files however they are chunked, and
// shards are streamed to disk without ever being held in memory.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"

namespace sluice {

// Every dimension of a synthetic model. Defaults are the k3-tiny fixture's shape.
struct SyntheticShape {
  int hidden = 128;
  int layers = 10;
  int heads = 4;  // MLA heads
  int kda_heads = 4;
  int kda_head_dim = 32;
  int kda_conv_kernel = 4;
  int q_lora = 96;
  int kv_lora = 64;
  int nope = 32;
  int rope = 16;
  int v_head = 32;
  int experts = 32;
  int top_k = 4;
  int moe_inter = 32;  // per routed expert and per shared expert
  int latent = 64;     // routed_expert_hidden_size
  int shared = 2;
  int dense_inter = 256;
  int block = 3;  // attn_res_block_size
  int vocab = 512;
  int reserved = 64;             // special ids at the top of the vocabulary
  std::vector<int> mla_layers;   // 1-based; empty = default_mla_layers(layers)
  int shards = 3;                // layers are split into this many contiguous groups
  double routed_scaling_factor = 1.0;
  double rms_norm_eps = 1e-5;
  int max_position_embeddings = 1048576;
  // K3.1 Pro's lightning indexer on every MLA layer (docs/k31-spec.md §1-2);
  // index_heads 0: none (K3). index_bias: write indexer.k_norm.bias too.
  int index_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  bool index_bias = true;
};

// The k3-tiny fixture's shape (hidden 128, 10 layers, 32 experts top-4, ...).
SyntheticShape tiny_preset();
// Real K3 dimensions for `layers` layers and `experts` experts per MoE layer,
// one shard per layer (layer l in shard l+1, as K3 ships it).
SyntheticShape k3_slice_preset(int layers, int experts);
// The same with K3.1 Pro's indexer: k31-tiny (4 heads x 32, top-k 16, so
// short prompts exercise the selection) and k31-slice (32 x 128, top-k 2048).
SyntheticShape k31_tiny_preset();
SyntheticShape k31_slice_preset(int layers, int experts);
// K3's schedule restricted to `layers`: 1-based multiples of 4, plus the last layer.
std::vector<int> default_mla_layers(int layers);
// Throws an Error naming the first bad option.
void validate_shape(const SyntheticShape& s);

// The name of reserved id `first + offset` (K3's scheme: +0 [BOS], +1 [EOS],
// +2 <|end_of_msg|>, ..., reserved-2 [UNK], reserved-1 [PAD], others
// <|reserved_token_ID|>).
std::string reserved_token_name(int offset, int reserved, int id);

// Bytes of one routed expert's six tensors.
uint64_t expert_span_bytes(const SyntheticShape& s);
// Tensors the checkpoint holds: 5 globals + per layer 6 common + 14 (KDA) or
// 8 (MLA; + 4 or 5 indexer tensors with index_heads) attention + 3 (dense) or 8 (MoE spine) + 6 per routed expert.
uint64_t synthetic_tensor_count(const SyntheticShape& s);

struct ShardPlan {
  std::string file_name;            // model-NNNNN-of-NNNNN.safetensors
  std::vector<TensorData> tensors;  // in data order; every tensor streams from `fill`
  SafetensorsLayout layout;
};

// The whole checkpoint, laid out but not generated: sizes are exact.
struct SyntheticModel {
  SyntheticShape shape;
  uint64_t seed = 0;
  nlohmann::json config;  // config.json
  std::vector<ShardPlan> shards;

  uint64_t tensor_bytes() const;  // index total_size
  uint64_t shard_bytes() const;   // sum of shard file sizes
};

SyntheticModel plan_synthetic_model(const SyntheticShape& shape, uint64_t seed);

struct WriteModelOptions {
  bool overwrite = false;  // allow a non-empty directory; stale shards there are removed
  // Called after each file lands (name, bytes); for progress output.
  std::function<void(const std::string& file, uint64_t bytes)> on_file;
};

// Writes the checkpoint into `dir` (created if missing): shards, index,
// tokenizer files, then config.json last. Refuses a non-empty directory unless
// options.overwrite, and refuses up front if the disk lacks the space.
void write_synthetic_model(const SyntheticModel& model, const std::string& dir,
                           const WriteModelOptions& options = {});

// Tokenizer files. tiktoken.model: one "base64(bytes) rank" line per rank:
// the 256 single bytes (printable first, as tiktoken orders them), then seeded
// merges, each the concatenation of two lower-ranked tokens, up to `ranks`.
std::string make_tiktoken_model(int ranks, uint64_t seed);
nlohmann::json make_tokenizer_config(const SyntheticShape& s);

}  // namespace sluice
