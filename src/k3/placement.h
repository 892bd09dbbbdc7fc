// k3/placement.h — what K3 asks of the VRAM placement (model/placement.h
// plans it): its spine pieces, routers, experts, scratch and state.
#pragma once
#include "model/placement.h"

namespace sluice {

struct Checkpoint;
class Spine;
struct MemoryPlan;

// The request for a model: its spine pieces as the RAM plan placed them, its
// routers before each MoE layer's FFN, its experts; the scratch and state it
// needs on the GPU. vram, overhead, the hit rate and the overrides are the caller's.
PlacementRequest placement_request(const Checkpoint& ck, const Spine& spine, const MemoryPlan& p);

}  // namespace sluice
