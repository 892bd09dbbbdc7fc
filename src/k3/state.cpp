#include "k3/state.h"

#include <algorithm>

namespace sluice {

SequenceState SequenceState::create(const ModelConfig& c) {
  SequenceState s;
  s.kda.resize(size_t(c.num_hidden_layers));
  s.mla.resize(size_t(c.num_hidden_layers));
  const size_t C = size_t(c.kda_dim()), D = size_t(c.kda_head_dim);
  for (int l = 0; l < c.num_hidden_layers; l++) {
    if (!c.is_kda_layer(l)) continue;
    s.kda[l].S.assign(size_t(c.kda_num_heads) * D * D, 0.0f);
    s.kda[l].conv.assign(3 * size_t(std::max(c.kda_conv_kernel - 1, 0)) * C, 0.0f);
  }
  return s;
}

void SequenceState::reset() {
  pos = 0;
  for (auto& k : kda) {
    std::fill(k.S.begin(), k.S.end(), 0.0f);
    std::fill(k.conv.begin(), k.conv.end(), 0.0f);
    k.stamp = 0;
  }
  for (auto& m : mla) {
    m.kv.clear();
    m.idx.clear();
    m.len = 0;
    m.stamp = 0;
  }
}

uint64_t SequenceState::bytes() const {
  uint64_t b = 0;
  for (const auto& k : kda) b += (k.S.size() + k.conv.size()) * sizeof(float);
  for (const auto& m : mla) b += (m.kv.size() + m.idx.size()) * sizeof(float);
  return b;
}

}  // namespace sluice
