#include "k3/step_mix.h"

namespace sluice {

namespace {

// Piece i's bytes through the kernels: int8 or bf16 by its kind, and, when it
// streams as a lossless pack, the same bytes through the decoder.
void add_kernel_bytes(StepMix& m, const Spine& spine, int i, bool streamed) {
  const double raw = double(spine.piece_bytes(i));
  (spine.piece_is_int8(i) ? m.int8 : m.bf16) += raw;
  if (streamed && spine.piece_is_decoded(i)) m.decoded += raw;
}

bool streamed(const std::vector<bool>& resident, int i) { return !(size_t(i) < resident.size() && resident[size_t(i)]); }

// A MoE layer's router: resident, bf16, computed every step.
double router_bytes(const ModelConfig& c) { return double(c.num_experts) * c.hidden_size * 2; }

}  // namespace

StepMix step_mix(const ModelConfig& c, const Spine& spine, const std::vector<bool>& resident) {
  StepMix m;
  for (int i = 0; i < spine.piece_count(); i++) {
    const double read = double(spine.piece_read_bytes(i));
    const bool streams = streamed(resident, i);
    m.spine_full_read += read;
    add_kernel_bytes(m, spine, i, streams);
    if (streams) (spine.piece_is_head(i) ? m.head_read : m.layers_read) += read;
  }
  for (int l = 0; l < c.num_hidden_layers; l++) m.moe_layers += c.is_moe_layer(l) && c.num_experts > 0;
  m.bf16 += m.moe_layers * router_bytes(c);
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
    add_kernel_bytes(m, spine, i, streamed(resident, i));
  }
  if (first >= 0) m.bf16 += router_bytes(c);  // the first MoE layer's
  return m;
}

}  // namespace sluice
