#include "model/options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/memory_limit.h"
#include "io/depth_profile.h"

namespace sluice {

// 3/4 of the memory this process may use (the smaller of RAM and its cgroup's
// limit, base/memory_limit.h): leave a quarter to the OS and the page cache
// (inside a cgroup: to the page cache its limit also charges).
uint64_t default_ram_budget() {
  const uint64_t usable = usable_memory().bytes;
  return usable > 0 ? usable / 4 * 3 : 8ull << 30;
}

int default_queue_depth(const std::string& dir, bool* saved) {
  const int qd = saved_queue_depth(dir);
  if (saved) *saved = qd > 0;
  return qd > 0 ? qd : kUnprofiledQueueDepth;
}

int reader_queue_depth(int depth, bool spine_streams) { return spine_streams ? std::max(1, depth / 2) : depth; }

uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return got == 2 ? uint64_t(resident) * uint64_t(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace sluice
