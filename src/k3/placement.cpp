#include "k3/placement.h"

#include <vector>

#include "checkpoint/checkpoint.h"
#include "k3/spine.h"
#include "model/memory_plan.h"

namespace sluice {

PlacementRequest placement_request(const Checkpoint& ck, const Spine& spine, const MemoryPlan& p) {
  const ModelConfig& c = ck.config;
  PlacementRequest r;
  r.layers = c.num_hidden_layers;
  const uint64_t router = uint64_t(c.num_experts) * uint64_t(c.hidden_size) * 2;
  int next_unit = 0;  // routers go in before their layer's FFN unit
  auto routers_until = [&](int unit) {
    for (; next_unit <= unit; next_unit++)
      if (next_unit % 2 == 1 && c.num_experts > 0 && c.is_moe_layer(next_unit / 2))
        r.pieces.push_back({router, next_unit, true});
  };
  // A matrix all of whose pieces are resident is read whole and multiplied
  // in one call (one mirror, one upload, one split): one piece here too.
  const auto resident = [&](int i) { return i < int(p.resident_pieces.size()) ? bool(p.resident_pieces[size_t(i)]) : true; };
  std::vector<bool> whole;  // by matrix
  for (int i = 0; i < spine.piece_count(); i++) {
    const size_t m = size_t(spine.piece_matrix(i));
    if (whole.size() <= m) whole.resize(m + 1, true);
    whole[m] = whole[m] && resident(i);
  }
  for (int i = 0; i < spine.piece_count(); i++) {
    routers_until(spine.piece_unit(i));
    const int m = spine.piece_matrix(i);
    if (i > 0 && whole[size_t(m)] && spine.piece_matrix(i - 1) == m) {
      r.pieces.back().bytes += spine.piece_bytes(i);
      continue;
    }
    r.pieces.push_back({spine.piece_bytes(i), spine.piece_unit(i), resident(i)});
  }
  routers_until(2 * r.layers);
  for (const PlacedPiece& q : r.pieces) r.resident_spine += q.in_ram ? q.bytes : 0;
  r.state = p.state_reserve;
  for (int l = 0; l < c.num_hidden_layers; l++)
    if (c.is_kda_layer(l)) r.state_sync += c.kda_state_floats() * sizeof(float);
  if (p.budget > 0) {
    const uint64_t held = p.baseline + p.working + p.fixed;
    r.host_room = p.budget > held ? p.budget - held : 0;
  }
  if (c.num_experts > 0) {
    r.expert_bytes = c.expert_span_bytes();
    int moe = 0;
    for (int l = 0; l < c.num_hidden_layers; l++) moe += c.is_moe_layer(l) ? 1 : 0;
    r.moe_layers = moe;
    r.touched = double(moe) * c.num_experts_per_token;
    r.all_experts = double(moe) * c.num_experts;
    // One MoE layer's gate and up projections staged at once (twice: tier
    // fills and per-call uploads each take arena room).
    r.scratch = 2 * uint64_t(c.num_experts_per_token) * (r.expert_bytes * 2 / 3);
  }
  return r;
}

}  // namespace sluice
