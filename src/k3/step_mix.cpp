#include "k3/step_mix.h"

namespace sluice {

StepMix step_mix(const ModelConfig& c, const Spine& spine, const std::vector<bool>& resident) {
  StepMix m;
  for (int i = 0; i < spine.piece_count(); i++) {
    const double read = double(spine.piece_read_bytes(i)), raw = double(spine.piece_bytes(i));
    m.spine_full_read += read;
    (spine.piece_is_int8(i) ? m.int8 : m.bf16) += raw;
    if (size_t(i) < resident.size() && resident[size_t(i)]) continue;
    (spine.piece_is_head(i) ? m.head_read : m.layers_read) += read;
    if (spine.piece_is_decoded(i)) m.decoded += raw;
  }
  for (int l = 0; l < c.num_hidden_layers; l++) m.moe_layers += c.is_moe_layer(l) && c.num_experts > 0;
  m.bf16 += double(m.moe_layers) * c.num_experts * c.hidden_size * 2;  // the routers (resident, computed every step)
  m.touched = double(m.moe_layers) * c.num_experts_per_token;
  m.mxfp4 = m.touched * double(c.expert_span_bytes());
  return m;
}

StepMix token_boundary_mix(const ModelConfig& c, const Spine& spine, const std::vector<bool>& resident) {
  int first = -1, last = -1;
  for (int l = 0; l < c.num_hidden_layers; l++)
    if (c.is_moe_layer(l) && c.num_experts > 0) last = l, first = first < 0 ? l : first;
  StepMix m;
  for (int i = 0; i < spine.piece_count(); i++) {
    const int u = spine.piece_unit(i);
    if (first >= 0 && u > 2 * first && u <= 2 * last + 1) continue;  // from the first MoE FFN to the last
    const double raw = double(spine.piece_bytes(i));
    (spine.piece_is_int8(i) ? m.int8 : m.bf16) += raw;
    if (spine.piece_is_decoded(i) && !(size_t(i) < resident.size() && resident[size_t(i)])) m.decoded += raw;
  }
  if (first >= 0) m.bf16 += double(c.num_experts) * c.hidden_size * 2;  // the first MoE layer's router
  return m;
}

}  // namespace sluice
