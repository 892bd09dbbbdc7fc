// checkpoint/index_json.h — model.safetensors.index.json: which shard holds
// which tensor.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

// Shard file names in order of first appearance, and tensor -> shard file, from
// the index's text; sluice::Error naming `path` if malformed (not JSON, nested
// deeper than an index, no weight_map, a shard name that is not a plain file name).
std::vector<std::string> parse_index_json(std::string_view text, const std::string& path,
                                          std::map<std::string, std::string>* weight_map);

}  // namespace sluice
