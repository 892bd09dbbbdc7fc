// k3/spine.h — the spine: every weight a forward pass reads except routed experts.
//
// A pass reads the spine as a fixed sequence of units:
//   unit 2l     layer l's attention part (input norm, AttnRes query, KDA or MLA)
//   unit 2l+1   layer l's FFN part (post norm, AttnRes query, dense FFN or MoE spine)
//   unit 2L+k   head chunk k (rows of lm_head), only in passes that want logits
// Each unit is resident (read once at start) or streamed: read again for every
// pass through one ring buffer by a loader thread (store/span_stream.h) that
// runs ahead of the computation as far as the ring allows. Which units stay is
// the memory plan's choice (k3/model.cpp): every spine byte is used by every
// token, so a resident spine byte saves one read per token, more than an
// expert-cache byte ever does. Small vectors (norms, taps, gates) and the MoE
// routers are always resident: the router of layer l+1 is what prefetch
// lookahead runs while layer l computes.
//
// The forward pass calls begin_pass(), then takes units in order (attention(l),
// ffn(l), head(k)); taking a unit releases the one before, so it must be done
// with it. Resident and streamed units give the same bytes: logits never depend
// on the plan.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "k3/weights.h"
#include "store/span_stream.h"

namespace sluice {

// Rows [row0, row0 + w.rows) of lm_head.
struct HeadChunk {
  Bf16Matrix w;
  int64_t row0 = 0;
};

class Spine {
 public:
  // Binds every unit (vectors read, matrices located; nothing big is read yet).
  // The head is cut into chunks of about head_chunk_bytes.
  Spine(const Checkpoint& ck, uint64_t head_chunk_bytes);
  ~Spine();
  Spine(const Spine&) = delete;
  Spine& operator=(const Spine&) = delete;

  int layer_units() const { return 2 * layers_; }
  int unit_count() const { return int(units_.size()); }
  // RAM a unit's matrices take (aligned supersets, as read).
  uint64_t unit_bytes(int u) const;
  // RAM that is resident whatever the plan: vectors and routers.
  uint64_t fixed_bytes() const { return fixed_bytes_; }
  // The smallest ring that can stream every unit.
  uint64_t min_ring_bytes() const;

  // Reads the routers and the units marked resident; streams the others
  // through a ring of ring_bytes (ignored when every unit is resident).
  void start(const std::vector<bool>& resident, uint64_t ring_bytes, const SpanReaderOptions& io);

  void begin_pass(bool with_head);
  const LayerWeights& attention(int l) { return layer_unit(2 * l); }
  const LayerWeights& ffn(int l) { return layer_unit(2 * l + 1); }
  int head_chunks() const { return int(units_.size()) - 2 * layers_; }
  const HeadChunk& head(int k);
  // Layer l's router, resident once started (MoE layers only).
  const Bf16Matrix& router(int l) const { return layers_w_[size_t(2 * l + 1)].moe.router; }
  const std::vector<float>& router_bias(int l) const { return layers_w_[size_t(2 * l + 1)].moe.bias; }

  bool all_resident() const { return !stream_; }
  bool unit_resident(int u) const { return units_[size_t(u)].resident; }
  // Spine matrix bytes read from files so far: at start, and streamed.
  uint64_t bytes_read() const;
  // What one pass streams (0 when all resident).
  uint64_t streamed_bytes_per_pass(bool with_head) const;
  // The streaming ring's counters (zeros when all resident).
  SpanStreamStats stream_stats() const;

 private:
  struct Unit {
    std::vector<MatrixRef> matrices;
    bool resident = false;
    int stream_item = -1;  // index in the stream when streamed
  };
  void take(int u);  // makes unit u's views valid
  const LayerWeights& layer_unit(int u) {
    take(u);
    return layers_w_[size_t(u)];
  }

  const Checkpoint& ck_;
  int layers_ = 0;
  std::vector<LayerWeights> layers_w_;  // one per layer unit; never resized (views point into it)
  std::vector<HeadChunk> head_w_;       // one per head chunk; never resized
  std::vector<Unit> units_;
  std::vector<MatrixRef> pinned_;       // routers
  uint64_t fixed_bytes_ = 0;
  AlignedBuffer pinned_bytes_, resident_bytes_;
  uint64_t resident_read_ = 0;
  std::unique_ptr<SpanStream> stream_;
  bool with_head_ = true;
};

}  // namespace sluice
