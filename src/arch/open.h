// arch/open.h — opens a model directory as the architecture its config.json
// names (model_type), behind model/model.h. Every architecture sluice runs is
// listed in arch/open.cpp: K3 (kimi_k3, its text model kimi_linear) and K3.1
// Pro (kimi_k31), both k3/'s code.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"
#include "model/preview.h"

namespace sluice {

// Opens DIR: checkpoint, memory plan, weights, reads. An unknown model_type
// is refused with the message the checkpoint's parser gives.
std::unique_ptr<Model> open_model(const std::string& dir, const ModelOptions& opt = {});

// The bytes a new sequence's state holds for a model of config `c`, before
// any token (what grows with the context is c.cache_bytes_per_position()).
uint64_t new_state_bytes(const ModelConfig& c);

// `sluice plan`'s view of checkpoint `ck` (model/preview.h); `ck` must outlive it.
std::unique_ptr<ModelPreview> preview_model(const Checkpoint& ck, const ModelOptions& o, double lossless_ratio,
                                            const std::string& ratio_basis);
// A checkpoint known by its config alone, for `sluice plan --preset`: k3, k31.
Checkpoint preset_checkpoint(const std::string& preset);

}  // namespace sluice
