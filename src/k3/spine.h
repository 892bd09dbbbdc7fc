// k3/spine.h — the spine's layers, resident or streamed.
//
// The spine is every weight read on every token except the routed experts.
// It is kept as units, two per layer (attention part, FFN part; see
// LayerPart). When it fits the RAM budget every unit is loaded once and stays.
// Otherwise units are streamed: two slots, and while the forward pass computes
// with unit u the next unit in pass order (u+1, wrapping to the first for the
// next token) is read into the other slot, so I/O overlaps compute. The
// forward pass must be done with a unit before it asks for the next one.
#pragma once
#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "k3/weights.h"

namespace sluice {

// Bytes of layer l's spine tensors in the checkpoint (or of the globals when l < 0).
uint64_t spine_tensor_bytes(const Checkpoint& ck, int layer);
// Bytes of one part of layer l's spine.
uint64_t spine_part_bytes(const Checkpoint& ck, int layer, LayerPart part);

class Spine {
 public:
  Spine(const Checkpoint& ck, bool resident);
  ~Spine();
  Spine(const Spine&) = delete;
  Spine& operator=(const Spine&) = delete;

  const LayerWeights& attention(int l) { return unit(2 * l); }
  const LayerWeights& ffn(int l) { return unit(2 * l + 1); }
  bool resident() const { return resident_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  const LayerWeights& unit(int u);
  LayerWeights load(int u) const { return load_layer_weights(ck_, u / 2, LayerPart(u % 2)); }

  struct Slot {
    int layer = -1;
    LayerWeights w;
  };
  const Checkpoint& ck_;
  bool resident_;
  std::vector<LayerWeights> all_;       // resident mode
  Slot slots_[2];                       // streamed mode
  std::future<LayerWeights> next_;      // streamed: the read in flight
  int next_layer_ = -1;
  uint64_t bytes_read_ = 0;
};

}  // namespace sluice
