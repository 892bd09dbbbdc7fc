#include "base/cache_file.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/json_parse.h"
#include "base/read_file.h"

namespace sluice {

std::string cache_file_path(const char* env_var, const char* name) {
  if (const char* p = std::getenv(env_var); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/sluice/" + name;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/sluice/" + name;
  return {};
}

nlohmann::json read_cache_json(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return nlohmann::json::object();
  try {
    nlohmann::json j = parse_json(read_regular_file(path, 1 << 20), path);
    return j.is_object() ? j : nlohmann::json::object();
  } catch (const Error&) {
    return nlohmann::json::object();
  }
}

void write_cache_json(const std::string& path, const nlohmann::json& j) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  write_file_atomic(path, j.dump(1) + "\n");
}

}  // namespace sluice
