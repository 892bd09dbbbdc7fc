#include "io/aligned_buffer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

namespace sluice {
namespace {

// Resident set of this process, in bytes (/proc/self/statm, field 2, pages).
size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t total = 0, resident = 0;
  f >> total >> resident;
  return resident * 4096;
}

TEST(AlignedBuffer, AlignedWritableAndRoundedToWholeUnits) {
  const size_t two_mib = size_t(2) << 20;
  for (size_t size : {size_t(1), size_t(4095), size_t(4096), two_mib - 1, two_mib, two_mib + 1,
                      size_t(17'550'000)}) {
    for (size_t alignment : {kIoAlign, size_t(8) << 20}) {
      SCOPED_TRACE(std::to_string(size) + " @ " + std::to_string(alignment));
      AlignedBuffer b(size, alignment);
      ASSERT_EQ(b.size(), size);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % alignment, 0u);
      if (size >= kHugePage) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHugePage, 0u);
      }
      // A full-block read may fill the last alignment unit (4 KiB) entirely.
      std::memset(b.data(), 0x5a, align_up(size, kIoAlign));
      EXPECT_EQ(b.data()[size - 1], 0x5a);
    }
  }
}

TEST(AlignedBuffer, MovesOwnershipAndFreesBigBuffersAtOnce) {
  const size_t size = size_t(64) << 20;
  const size_t before = resident_bytes();
  {
    AlignedBuffer a(size);
    std::memset(a.data(), 1, size);
    EXPECT_GE(resident_bytes(), before + size / 2);
    AlignedBuffer b(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(a.data(), nullptr);
    ASSERT_EQ(b.size(), size);
    EXPECT_EQ(b.data()[size - 1], 1);
    AlignedBuffer c(4096);
    c = std::move(b);  // frees c's small buffer, takes b's mapping
    EXPECT_EQ(c.data()[0], 1);
  }
  // Big buffers are their own mapping: the memory is back once they go.
  EXPECT_LT(resident_bytes(), before + size / 4);
}

}  // namespace
}  // namespace sluice
