// k3/step_mix.h — what one decode step pushes through each kernel and reads
// from disk, by class, for a spine bound under a memory plan: the bytes both
// `sluice plan` projects from and `sluice bench` records beside its measured
// compute (so a measured step on one model scales to another's mix).
#pragma once
#include <vector>

#include "checkpoint/config.h"
#include "k3/spine.h"
#include "model/step_mix.h"

namespace sluice {

// `resident`: the memory plan's resident_pieces (one flag per spine piece).
StepMix step_mix(const ModelConfig& c, const Spine& spine, const std::vector<bool>& resident);

// The kernel bytes of a decode step's token boundary: what runs after the last
// MoE layer's experts and before the first MoE layer's router has chosen (the
// head, the layers before the first MoE layer, that layer's attention and
// router). No expert read of the step is known then, so the expert reader has
// nothing of its own to read (bench: token_boundary_s_per_token). Only the
// kernel fields (bf16, int8, decoded) are set; a model with no MoE layer is
// all boundary.
StepMix token_boundary_mix(const ModelConfig& c, const Spine& spine, const std::vector<bool>& resident);

}  // namespace sluice
