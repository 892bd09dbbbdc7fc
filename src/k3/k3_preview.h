// k3/k3_preview.h — K3's model/preview.h: the spine bound as open_k3_model
// would bind it (its pack, or a modelled one when asked for and absent).
#pragma once
#include <memory>
#include <string>

#include "checkpoint/checkpoint.h"
#include "model/preview.h"

namespace sluice {

// `o.spine`, `o.spine_pack` and `o.spine_chunk_bytes` choose the spine; a
// lossless or int8 spine with no pack is modelled (lossless: each block at
// lossless_ratio of its bf16 bytes; int8: its exact row bytes). `ck` must
// outlive the preview.
// `ratio_basis` says where lossless_ratio came from, for dense_what().
std::unique_ptr<ModelPreview> preview_k3(const Checkpoint& ck, const ModelOptions& o, double lossless_ratio,
                                         const std::string& ratio_basis);

// The presets `sluice plan --preset` knows: k3 (Kimi K3), k31 (Kimi K3.1 Pro).
Checkpoint k3_preset_checkpoint(const std::string& preset);

}  // namespace sluice
