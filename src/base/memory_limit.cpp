#include "base/memory_limit.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/bytes.h"

namespace sluice {
namespace {

// v1 reports "no limit" as the largest page-aligned signed 64-bit number;
// anything from 2^60 up is no limit in practice.
constexpr uint64_t kUnlimited = 1ull << 60;

// The limit in one file: 0 for "max", a missing file or anything unreadable.
uint64_t read_limit(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!f || !(f >> word) || word == "max") return 0;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(word.c_str(), &end, 10);
  if (errno || end == word.c_str() || *end || v >= kUnlimited) return 0;
  return v;
}

// The smallest limit in `file` in `mount`+`path` and each folder above it.
void walk_up(const std::string& mount, std::string path, const std::string& file, MemoryLimit& best) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    const std::string at = mount + path + "/" + file;
    const uint64_t v = read_limit(at);
    if (v > 0 && (best.bytes == 0 || v < best.bytes)) best = {v, at};
    if (path.empty()) return;
    path.erase(path.rfind('/'));
  }
}

}  // namespace

MemoryLimit cgroup_memory_limit(const std::string& root) {
  MemoryLimit best;
  std::ifstream f(root + "/proc/self/cgroup");
  const std::string fs = root + "/sys/fs/cgroup";
  for (std::string line; std::getline(f, line);) {
    // "hierarchy-id:controller,list:/path"; the path may itself hold ':'.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    if (id == "0" && controllers.empty()) {
      walk_up(fs, path, "memory.max", best);
      walk_up(fs + "/unified", path, "memory.max", best);
      continue;
    }
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');)
      if (c == "memory") walk_up(fs + "/memory", path, "memory.limit_in_bytes", best);
  }
  return best;
}

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

MemoryLimit usable_memory() {
  const uint64_t ram = physical_memory();
  MemoryLimit cg = cgroup_memory_limit();
  if (cg.bytes > 0 && (ram == 0 || cg.bytes < ram)) return cg;
  return {ram, ""};
}

std::string describe(const MemoryLimit& m) {
  if (m.bytes == 0) return "unknown RAM";
  if (m.file.empty()) return "this machine's " + format_bytes(m.bytes) + " of RAM";
  return "the cgroup memory limit " + format_bytes(m.bytes) + " (" + m.file + ")";
}

}  // namespace sluice
