// k3/state.h — everything one sequence carries between forward calls.
//
// Only two things cross positions in K3 (spec §3.8, §5): each KDA layer's
// recurrent state S and short-conv history, and each MLA layer's latent cache
// (c' after kv_a_layernorm, and the raw k_pe, per position; K3.1 Pro adds the
// indexer keys, docs/k31-spec.md §5). AttnRes state is
// rebuilt per position and never stored. A SequenceState is a plain value:
// copying it is a snapshot, assigning it back is a rollback.
#pragma once
#include <cstdint>
#include <vector>

#include "checkpoint/config.h"

namespace sluice {

struct KdaLayerState {
  std::vector<float> S;     // [NH][D key i][D value j], FP32, starts at zero
  std::vector<float> conv;  // [3 (q,k,v)][K-1][C] previous pre-conv projections, oldest first
  // Names S's bits for a device copy of them (kernels/backend.h: StateStamp);
  // 0: none. Copies carry it; whatever writes S here on the host sets it to 0.
  uint64_t stamp = 0;
};

struct MlaLayerCache {
  std::vector<float> kv;  // [len][kv_lora + rope]: c' then k_pe, FP32
  // K3.1 Pro's indexer key cache (docs/k31-spec.md §5): [len][index_head_dim]
  // keys after the LayerNorm, FP32; empty on a layer without an indexer. It
  // lives beside kv so that every copy (snapshot) and cut (rollback) of the
  // cache carries it; its rows always match kv's.
  std::vector<float> idx;
  int64_t len = 0;
  // Names kv's bits for a device copy (kernels/backend.h: StateStamp); 0:
  // none. Cutting the cache back keeps it; rewriting rows on the host sets 0.
  uint64_t stamp = 0;
};

struct SequenceState {
  int64_t pos = 0;                   // tokens consumed so far
  std::vector<KdaLayerState> kda;    // by layer; empty entries for MLA layers
  std::vector<MlaLayerCache> mla;    // by layer; empty entries for KDA layers

  static SequenceState create(const ModelConfig& c);
  void reset();
  // Bytes held (state + cache); the MLA cache grows with the context.
  uint64_t bytes() const;
};

// The undo record of one forward chunk (forward(..., undo)), enough to cut the
// state back to any prefix of the chunk without reading a weight: per KDA layer
// the state before the chunk (kept without a copy: k3/kda.cpp) and the chunk's
// recurrence inputs, replayed for the kept positions; an MLA cache is just
// truncated. Valid until the next forward with it; rollback() consumes it.
struct KdaUndo {
  std::vector<float> S, conv;              // before the chunk
  uint64_t S_stamp = 0;                    // S's stamp before the chunk
  std::vector<float> q, k, v, f, beta;     // [T][...] pre-conv projections, gate input, beta logits
};

struct ChunkUndo {
  int64_t pos0 = 0;  // state.pos before the chunk
  int T = 0;         // chunk length; 0: nothing to undo
  std::vector<KdaUndo> kda;  // by layer; empty entries for MLA layers
};

}  // namespace sluice
