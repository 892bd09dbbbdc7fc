// k3/weights.h — K3's spine weights bound to the checkpoint's tensors.
//
// The spine is everything but the routed experts. Each layer's spine tensors
// are read into one buffer the layer owns (so a layer can later be streamed in
// and dropped as a unit); big matrices stay bf16 as shipped and are views into
// that buffer, small vectors (norms, conv taps, gates, router bias) are
// converted to FP32 at load. Shapes and dtypes are checked against the config
// when binding: a wrong tensor is an error naming the tensor and the shard.
// Routed experts are not here: see k3/experts.h.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "store/aligned_buffer.h"

namespace sluice {

// A bf16 matrix [rows][cols] (row-major, y = W x), a view into a layer buffer.
struct Bf16Matrix {
  const uint16_t* w = nullptr;
  int rows = 0, cols = 0;
};

struct KdaWeights {
  Bf16Matrix q, k, v, g, o, f_a, f_b, b;   // q/k/v/g: [C, H]; o: [H, C]; f_a: [D, H]; f_b: [C, D]; b: [NH, H]
  std::vector<float> q_conv, k_conv, v_conv;  // [C][K] taps, tap K-1 on the current token
  std::vector<float> a;                       // exp(A_log[h]) for h < NH (A_log is per head)
  std::vector<float> dt_bias;                 // [C]
  std::vector<float> o_norm;                  // [D], shared by all heads
};

struct MlaWeights {
  Bf16Matrix q_a, q_b, kv_a, kv_b, g, o;  // q_a: [q_lora, H]; q_b: [NH*(nope+rope), q_lora];
                                           // kv_a: [kv_lora+rope, H]; kv_b: [NH*(nope+v), kv_lora];
                                           // g: [NH*v, H]; o: [H, NH*v]
  std::vector<float> q_a_norm, kv_a_norm;
};

struct DenseWeights {
  Bf16Matrix gate, up, down;  // gate/up: [I, H]; down: [H, I]
};

struct MoeWeights {
  Bf16Matrix router;           // [E, H]
  std::vector<float> bias;     // [E] e_score_correction_bias (selection only)
  Bf16Matrix rdown, rup;       // [Lat, H], [H, Lat]
  std::vector<float> rnorm;    // [Lat]
  Bf16Matrix sh_gate, sh_up, sh_down;  // [S, H], [S, H], [H, S]; absent when no shared experts
};

// A layer's spine comes in two parts, loaded (and streamed) separately: the
// attention sub-block (input norm, AttnRes query, KDA or MLA) and the FFN
// sub-block (post-attention norm, AttnRes query, dense FFN or MoE spine).
enum class LayerPart { Attention = 0, Ffn = 1 };

// The weights of one part of one layer; the other part's fields stay empty.
struct LayerWeights {
  std::vector<float> input_norm, post_norm;  // [H]
  std::vector<float> u_attn, u_mlp;          // AttnRes pseudo-queries: res_norm ⊙ res_proj, FP32
  KdaWeights kda;                            // when the layer is KDA
  MlaWeights mla;                            // when the layer is MLA
  DenseWeights dense;                        // when the layer is dense
  MoeWeights moe;                            // when the layer is MoE
  AlignedBuffer bytes;                       // owns the bf16 matrices above
  uint64_t nbytes = 0;
};

// The embedding is never loaded whole: a forward pass reads only its tokens'
// rows. The head ([V, H], read whole every token) is resident when the spine
// is, else streamed in chunks (k3/model.cpp).
struct GlobalWeights {
  TensorInfo embed, head;     // [V, H] bf16, where they lie on disk
  Bf16Matrix lm_head;         // resident head, or w == nullptr when streamed
  std::vector<float> final_norm, u_out;
  AlignedBuffer bytes;
  uint64_t nbytes = 0;
};

// Reads and binds the globals, or one layer's spine. Throws on any mismatch.
GlobalWeights load_global_weights(const Checkpoint& ck, bool resident_head);
// Reads rows [first, first+count) of a bf16 [rows, cols] tensor from disk.
void read_bf16_rows(const Checkpoint& ck, const TensorInfo& t, int64_t first, int64_t count, uint16_t* out);
LayerWeights load_layer_weights(const Checkpoint& ck, int layer, LayerPart part);

}  // namespace sluice
