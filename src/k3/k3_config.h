// k3/k3_config.h — the published Kimi K3's config, shipped so that the memory
// plan and its projections (`sluice plan --preset k3`) work with no weights.
#pragma once
#include <string>

#include "k3/weights.h"

namespace sluice {

// config.json of moonshotai/Kimi-K3 (the text part of the multimodal wrapper:
// vision_config left out), as docs/k3-spec.md §1 records it from the
// validators that checked it against the real file.
extern const char* const kK3ConfigJson;

// K3's config, parsed (throws only if the constant is broken: a test checks it).
ModelConfig k3_config();

// Kimi K3.1 Pro's config (docs/k31-spec.md §1.1): K3's with the canonical
// `dsa_config` (32 heads x 128, top-k 2048, every full-attention layer) and
// its architecture name; `sluice plan --preset k31`.
ModelConfig k31_config();

// A layout-only checkpoint (k3/weights.h: no shards) of `config`, named `name`
// in messages.
Checkpoint layout_checkpoint(const ModelConfig& config, const std::string& name);

}  // namespace sluice
