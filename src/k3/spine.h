// k3/spine.h — the spine's layers, resident or streamed.
//
// The spine is every weight read on every token except the routed experts.
// When it fits the RAM budget every layer is loaded once and stays. Otherwise
// layers are streamed: two slots, and while the forward pass computes layer l
// the next layer in pass order (l+1, wrapping to 0 for the next token) is read
// into the other slot, so I/O overlaps compute. The forward pass must be done
// with layer l before it asks for layer l+1.
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

class Spine {
 public:
  Spine(const Checkpoint& ck, bool resident);
  ~Spine();
  Spine(const Spine&) = delete;
  Spine& operator=(const Spine&) = delete;

  const LayerWeights& layer(int l);
  bool resident() const { return resident_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
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
