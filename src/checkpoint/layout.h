// checkpoint/layout.h — a checkpoint known by its config alone.
#pragma once
#include "checkpoint/checkpoint.h"

namespace sluice {

// A checkpoint known by its config alone has no shards (open_checkpoint never
// gives one: k3/k3_config.h's layout_checkpoint does, for `sluice plan
// --preset`). Binding it locates each tensor at the shape the config gives it,
// back to back in made-up files, and reads nothing; nothing can be read from it.
inline bool layout_only(const Checkpoint& ck) { return ck.shard_paths.empty(); }

}  // namespace sluice
