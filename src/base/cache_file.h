// base/cache_file.h — small JSON files a command saves for later ones on the
// same machine (the disk's read depth, the engine's measured compute).
//
// Path: $ENV_VAR if set, else $XDG_CACHE_HOME/sluice/NAME, else
// ~/.cache/sluice/NAME; empty when no home is known.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace sluice {

std::string cache_file_path(const char* env_var, const char* name);

// The file's JSON object, or an empty object when it is missing, unreadable
// or not an object (a saved measurement is a hint, never a reason to fail).
nlohmann::json read_cache_json(const std::string& path);

// Writes `j` to `path` atomically, creating its folder.
void write_cache_json(const std::string& path, const nlohmann::json& j);

}  // namespace sluice
