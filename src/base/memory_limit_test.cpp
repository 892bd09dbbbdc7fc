// The cgroup memory limit reader, on v1 and v2 file layouts built in a temp folder.
#include "base/memory_limit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace sluice {
namespace {

namespace fs = std::filesystem;

struct Root {
  fs::path path = fs::path(::testing::TempDir()) /
                  ("memory-limit-" + std::to_string(::getpid()) + "-" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Root() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Root() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
  }
  std::string str() const { return path.string(); }
};

TEST(MemoryLimit, V2ReadsTheProcessCgroupsMemoryMax) {
  Root r;
  r.write("proc/self/cgroup", "0::/system.slice/sluice.service\n");
  r.write("sys/fs/cgroup/system.slice/sluice.service/memory.max", "268435456\n");
  r.write("sys/fs/cgroup/system.slice/memory.max", "max\n");
  const MemoryLimit m = cgroup_memory_limit(r.str());
  EXPECT_EQ(m.bytes, 268435456u);
  EXPECT_EQ(m.file, r.str() + "/sys/fs/cgroup/system.slice/sluice.service/memory.max");
}

TEST(MemoryLimit, V2MaxIsNoLimitAndAParentsLimitBounds) {
  Root r;
  r.write("proc/self/cgroup", "0::/a/b\n");
  r.write("sys/fs/cgroup/a/b/memory.max", "max\n");
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 0u);
  r.write("sys/fs/cgroup/a/memory.max", "1073741824\n");
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 1073741824u);
  // The smaller of the two wins.
  r.write("sys/fs/cgroup/a/b/memory.max", "2147483648\n");
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 1073741824u);
}

// Inside a container /proc/self/cgroup may name the host's path while the
// mount shows only the container's own cgroup at its root.
TEST(MemoryLimit, V2ContainerPathMissingFallsBackToTheMountRoot) {
  Root r;
  r.write("proc/self/cgroup", "0::/docker/0123abcd\n");
  r.write("sys/fs/cgroup/memory.max", "17179869184\n");
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 17179869184u);
}

TEST(MemoryLimit, V1ReadsLimitInBytesAndItsUnlimited) {
  Root r;
  r.write("proc/self/cgroup",
          "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/x1\n3:cpu,cpuacct:/\n0::/\n");
  r.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
  r.write("sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 0u);
  r.write("sys/fs/cgroup/memory/process_api/x1/memory.limit_in_bytes", "536870912\n");
  const MemoryLimit m = cgroup_memory_limit(r.str());
  EXPECT_EQ(m.bytes, 536870912u);
  EXPECT_EQ(m.file, r.str() + "/sys/fs/cgroup/memory/process_api/x1/memory.limit_in_bytes");
}

TEST(MemoryLimit, V1MemoryControllerSharedWithOthers) {
  Root r;
  r.write("proc/self/cgroup", "5:cpu,memory:/job\n");
  r.write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "1048576000\n");
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 1048576000u);
}

TEST(MemoryLimit, NothingReadableIsNoLimit) {
  Root r;
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 0u);  // no proc/self/cgroup
  r.write("proc/self/cgroup", "garbage\n0::relative\n4:memory:/x\n");
  r.write("sys/fs/cgroup/memory/x/memory.limit_in_bytes", "12abc\n");
  EXPECT_EQ(cgroup_memory_limit(r.str()).bytes, 0u);
}

TEST(MemoryLimit, PhysicalMemoryIsKnownHere) { EXPECT_GT(physical_memory(), 0u); }

}  // namespace
}  // namespace sluice
