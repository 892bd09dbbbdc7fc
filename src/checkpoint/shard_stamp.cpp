#include "checkpoint/shard_stamp.h"

#include <sys/stat.h>

#include "base/error.h"

namespace sluice {

ShardStamp shard_stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(path, "cannot stat");
  return {uint64_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::string base_name(const std::string& p) {
  const size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

nlohmann::json shard_stamps_json(const Checkpoint& ck) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < ck.shard_sizes.size(); i++) {
    const ShardStamp s = shard_stamp(ck.shard_paths[i]);
    if (s.bytes != ck.shard_sizes[i]) fail(ck.shard_paths[i], "changed since the checkpoint was opened");
    out.push_back({{"file", base_name(ck.shard_paths[i])}, {"bytes", s.bytes}, {"mtime_ns", s.mtime_ns}});
  }
  return out;
}

std::string shard_stamps_differ(const nlohmann::json& shards, const Checkpoint& ck) {
  if (!shards.is_array() || shards.size() != ck.shard_sizes.size()) return "it was made from another checkpoint (shard count differs)";
  for (size_t i = 0; i < shards.size(); i++) {
    const std::string name = base_name(ck.shard_paths[i]);
    if (shards[i].value("file", "") != name || shards[i].value("bytes", uint64_t(0)) != ck.shard_sizes[i])
      return "it was made from another checkpoint (" + name + " differs in name or size)";
  }
  for (size_t i = 0; i < shards.size(); i++)
    if (shard_stamp(ck.shard_paths[i]) != ShardStamp{ck.shard_sizes[i], shards[i].value("mtime_ns", int64_t(0))})
      return base_name(ck.shard_paths[i]) + " was modified after it was made (another revision, or an edit)";
  return "";
}

}  // namespace sluice
