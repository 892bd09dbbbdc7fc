// base/memory_limit.h — the memory a container lets this process use.
//
// A container (docker, podman, a systemd unit with MemoryMax=) bounds memory
// with its cgroup; physical RAM says nothing about it, and a budget planned
// from RAM alone gets the process OOM-killed. The limit is read where the
// kernel publishes it:
//   cgroup v2: /proc/self/cgroup "0::/PATH" -> /sys/fs/cgroup/PATH/memory.max
//              (also under /sys/fs/cgroup/unified/, the hybrid layout)
//   cgroup v1: "N:...memory...:/PATH" -> /sys/fs/cgroup/memory/PATH/memory.limit_in_bytes
// PATH and each folder above it are read and the smallest limit wins (a
// parent's limit bounds its children; inside a container the process's path
// is often the host's and only the mount's root exists). "max", v1's
// "unlimited" (a number near 2^63) and missing files mean no limit.
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

struct MemoryLimit {
  uint64_t bytes = 0;  // 0: no limit found
  std::string file;    // where it was read (for messages)
};

// `root` is prepended to every path read ("" for the real system; tests pass a
// folder that holds proc/self/cgroup and sys/fs/cgroup/...).
MemoryLimit cgroup_memory_limit(const std::string& root = "");

// The RAM this machine has (sysconf), 0 when unknown.
uint64_t physical_memory();

// The memory this process may use: the smaller of physical RAM (file empty)
// and its cgroup's limit (file: where it was read); bytes 0 when neither is known.
MemoryLimit usable_memory();

// "this machine's 23.4 GiB of RAM", "the cgroup memory limit 256 MiB (/sys/fs/cgroup/...)".
std::string describe(const MemoryLimit& m);

}  // namespace sluice
