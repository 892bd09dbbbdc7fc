// k3/weights.h — K3's spine weights bound to the checkpoint's tensors.
//
// The spine is everything but the routed experts. Big matrices stay bf16 as
// shipped and are views into memory the spine owns (k3/spine.h decides whether
// that memory is resident or a streaming ring); small vectors (norms, conv
// taps, gates, router bias) are converted to FP32 once, when binding. Shapes and dtypes are checked against the config
// when binding: a wrong tensor is an error naming the tensor and the shard.
// Routed experts are not here: see io/expert_source.h.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/layout.h"
#include "io/aligned_buffer.h"
#include "io/span_stream.h"

namespace sluice {

// A bf16 matrix [rows][cols] (row-major, y = W x). `w` is set when the whole
// matrix is in memory; a streamed (or partly resident) one has w == nullptr and
// is multiplied through the spine, which reads it in row chunks (k3/spine.h).
struct Bf16Matrix {
  const uint16_t* w = nullptr;
  int rows = 0, cols = 0;
  int id = -1;  // the spine's index for it
};

// Each sublayer lists its spine matrices in the order its forward pass uses
// them (use_order()): binding locates them in that order, so a streamed spine
// is read in it, and a test checks that the forward pass follows it.
struct KdaWeights {
  Bf16Matrix q, k, v, g, o, f_a, f_b, b;   // q/k/v/g: [C, H]; o: [H, C]; f_a: [D, H]; f_b: [C, D]; b: [NH, H]
  std::vector<float> q_conv, k_conv, v_conv;  // [C][K] taps, tap K-1 on the current token
  std::vector<float> a;                       // exp(A_log[h]) for h < NH (A_log is per head)
  std::vector<float> dt_bias;                 // [C]
  std::vector<float> o_norm;                  // [D], shared by all heads
  std::vector<Bf16Matrix*> use_order() { return {&q, &k, &v, &g, &f_a, &f_b, &b, &o}; }
};

struct MlaWeights {
  Bf16Matrix q_a, q_b, kv_a, kv_b, g, o;  // q_a: [q_lora, H]; q_b: [NH*(nope+rope), q_lora];
                                           // kv_a: [kv_lora+rope, H]; kv_b: [NH*(nope+v), kv_lora];
                                           // g: [NH*v, H]; o: [H, NH*v]
  std::vector<float> q_a_norm, kv_a_norm;
  // K3.1 Pro's lightning indexer (docs/k31-spec.md §2.1), DSA layers only (else
  // empty): idx_q_b [NI*DI, q_lora], idx_k [DI, H], idx_w [NI, H]; the key
  // LayerNorm's gain and shift [DI] (shift zeros when the checkpoint has none).
  Bf16Matrix idx_q_b, idx_k, idx_w;
  std::vector<float> idx_k_norm_w, idx_k_norm_b;
  std::vector<Bf16Matrix*> use_order() { return {&q_a, &q_b, &kv_a, &g, &idx_q_b, &idx_k, &idx_w, &kv_b, &o}; }
};

struct DenseWeights {
  Bf16Matrix gate, up, down;  // gate/up: [I, H]; down: [H, I]
  std::vector<Bf16Matrix*> use_order() { return {&gate, &up, &down}; }
};

struct MoeWeights {
  Bf16Matrix router;           // [E, H]
  std::vector<float> bias;     // [E] e_score_correction_bias (selection only)
  Bf16Matrix rdown, rup;       // [Lat, H], [H, Lat]
  std::vector<float> rnorm;    // [Lat]
  Bf16Matrix sh_gate, sh_up, sh_down;  // [S, H], [S, H], [H, S]; absent when no shared experts
  // The router is not here: it is pinned (resident whatever the budget; the lookahead needs it early).
  // The shared experts compute while the routed experts' reads land (k3/moe.cpp), before rup.
  std::vector<Bf16Matrix*> use_order() { return {&rdown, &sh_gate, &sh_up, &sh_down, &rup}; }
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
};

// The embedding is never loaded whole: a forward pass reads only its tokens'
// rows. The head ([V, H], read whole every token) is part of the spine, in
// chunks of rows (k3/spine.h).
struct GlobalWeights {
  TensorInfo embed, head;     // [V, H] bf16, where they lie on disk
  std::vector<float> final_norm, u_out;
};

// One bf16 matrix as bound: where its bytes lie, and the view to point at them
// once they are in memory (resident, or in the streaming ring).
struct MatrixRef {
  Bf16Matrix* view = nullptr;
  FileSpan span;         // shard, offset, bytes
  bool whole_only = false; // indexed directly (not only multiplied): never cut into row chunks
};

// What binding one unit found: its vectors are read and converted (FP32, kept
// for the model's lifetime); its matrices are only located.
struct UnitTensors {
  std::vector<MatrixRef> matrices;  // in use order (the sublayer's use_order()): resident, or streamed every pass
  std::vector<MatrixRef> pinned;    // read once and kept whatever the budget (the MoE router)
  uint64_t vector_bytes = 0;        // RAM the FP32 vectors take
};

// Binds the globals: embedding and head located, final norm and u_out read.
GlobalWeights load_global_weights(const Checkpoint& ck);
// Reads rows [first, first+count) of a bf16 [rows, cols] tensor from disk.
void read_bf16_rows(const Checkpoint& ck, const TensorInfo& t, int64_t first, int64_t count, uint16_t* out);
// Binds one part of layer l into `w` (in place: the views in `out` point into it).
// Matrices come in the sublayer's use_order() (a streamed spine is read in
// that order). Throws on any shape or dtype mismatch, naming the tensor and the shard.
void bind_layer_part(const Checkpoint& ck, int layer, LayerPart part, LayerWeights& w, UnitTensors* out);
// Reads every matrix of `refs` with O_DIRECT into one buffer (returned) and points the views at it.
AlignedBuffer read_matrices(const Checkpoint& ck, const std::vector<MatrixRef>& refs);

}  // namespace sluice
