// checkpoint/shard_stamp.h — binding a derived file to the shards it was made from.
//
// A shard's identity as the file system keeps it: its size and modification
// time (ns). Checking it costs one stat(2) per shard (K3: 96 shards, 1.5 TB,
// microseconds), never a read of the shards: a derived file (a spine pack,
// pack/pack.h; a stripe, io/stripe.h) is used only with the very files it was
// made from. Any rewrite of a shard (an edit, a new revision installed by
// setup, a copy of the folder without its times) moves the time.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"

namespace sluice {

struct ShardStamp {
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
  bool operator==(const ShardStamp&) const = default;
};

// Throws naming `path` if it cannot be stat'ed.
ShardStamp shard_stamp(const std::string& path);

// The last path component.
std::string base_name(const std::string& path);

// [{"file", "bytes", "mtime_ns"}] for every shard of ck, stamped now; throws
// naming a shard whose size differs from what ck opened.
nlohmann::json shard_stamps_json(const Checkpoint& ck);

// Why the stamps `shards` (as shard_stamps_json wrote them) do not describe
// ck's shards as they are now ("model-00001-of-00002.safetensors was modified
// after ..."), or "" when they do.
std::string shard_stamps_differ(const nlohmann::json& shards, const Checkpoint& ck);

}  // namespace sluice
