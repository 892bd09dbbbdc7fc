#include "k3/spine.h"

#include <string>

namespace sluice {

uint64_t spine_tensor_bytes(const Checkpoint& ck, int layer) {
  const std::string prefix = layer < 0 ? "" : "model.layers." + std::to_string(layer) + ".";
  uint64_t total = 0;
  for (const auto& [name, t] : ck.tensors) {
    if (name.find(".experts.") != std::string::npos) continue;
    bool in_layer = name.rfind("model.layers.", 0) == 0;
    if (layer < 0 ? !in_layer : name.rfind(prefix, 0) == 0) total += t.nbytes;
  }
  return total;
}

Spine::Spine(const Checkpoint& ck, bool resident) : ck_(ck), resident_(resident) {
  if (resident_) {
    for (int l = 0; l < ck.config.num_hidden_layers; l++) {
      all_.push_back(load_layer_weights(ck, l));
      bytes_read_ += all_.back().nbytes;
    }
  }
}

Spine::~Spine() {
  if (next_.valid()) next_.wait();
}

const LayerWeights& Spine::layer(int l) {
  if (resident_) return all_[size_t(l)];
  const int L = ck_.config.num_hidden_layers;
  int cur = slots_[0].layer == l ? 0 : slots_[1].layer == l ? 1 : -1;
  if (cur < 0) {
    // The pass is done with the previous layer: free both slots, then take l.
    for (Slot& s : slots_) s = Slot{};
    cur = 0;
    if (next_.valid() && next_layer_ == l) {
      slots_[0].w = next_.get();  // rethrows a read error from the loader
    } else {
      if (next_.valid()) next_.get();  // a stale read (the pass restarted elsewhere): drop it
      slots_[0].w = load_layer_weights(ck_, l);
    }
    slots_[0].layer = l;
    bytes_read_ += slots_[0].w.nbytes;
  }
  // Read the next layer in pass order while this one computes.
  const int n = (l + 1) % L;
  if (n != l && slots_[1 - cur].layer != n && !(next_.valid() && next_layer_ == n)) {
    if (next_.valid()) next_.get();
    next_layer_ = n;
    next_ = std::async(std::launch::async, [this, n] { return load_layer_weights(ck_, n); });
  }
  return slots_[cur].w;
}

}  // namespace sluice
