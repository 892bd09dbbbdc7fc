// The request-memory semaphore and its cost model (serve/request_memory.h).
#include "serve/request_memory.h"

#include <gtest/gtest.h>

#include <thread>

namespace sluice::serve {
namespace {

using std::chrono::milliseconds;

TEST(RequestMemory, TakesWaitsAndGivesBack) {
  RequestMemory m(100);
  EXPECT_FALSE(m.take(101, milliseconds(0)));  // never fits
  ASSERT_TRUE(m.take(60, milliseconds(0)));
  EXPECT_FALSE(m.take(50, milliseconds(10)));  // busy: not within the wait
  EXPECT_EQ(m.in_use(), 60u);
  std::thread giver([&] {
    std::this_thread::sleep_for(milliseconds(20));
    m.give(60);
  });
  EXPECT_TRUE(m.take(50, milliseconds(10000)));  // comes once the other gives back
  giver.join();
  EXPECT_EQ(m.in_use(), 50u);
  m.give(50);
  EXPECT_EQ(m.in_use(), 0u);
}

TEST(RequestMemory, GrantGrowsAndReleasesOnce) {
  RequestMemory m(100);
  {
    MemoryGrant g(&m, 0);
    EXPECT_TRUE(g.take(30, milliseconds(0)));
    EXPECT_TRUE(g.take(30, milliseconds(0)));
    EXPECT_FALSE(g.take(50, milliseconds(0)));
    EXPECT_EQ(g.bytes(), 60u);
    MemoryGrant moved = std::move(g);
    EXPECT_EQ(m.in_use(), 60u);
    moved.release();
    EXPECT_EQ(m.in_use(), 0u);
    moved.release();
  }
  EXPECT_EQ(m.in_use(), 0u);
}

TEST(RequestMemory, CostModel) {
  const uint64_t cap = 4095;
  EXPECT_EQ(request_cost(1000, cap) - request_cost(0, cap), kBytesPerBodyByte * 1000);
  const uint64_t mem = 8ull << 20;
  const uint64_t body = largest_body(mem, cap);
  EXPECT_GT(body, 1ull << 20);
  EXPECT_LE(request_cost(body, cap), mem);
  EXPECT_GT(request_cost(body + 1, cap), mem);
  EXPECT_EQ(largest_body(request_cost(0, cap), cap), 0u);
  // The JSON values paid for: a token-id prompt of the cap, and more for bigger bodies.
  EXPECT_GE(json_value_limit(0, cap), cap);
  EXPECT_GT(json_value_limit(1 << 20, cap), json_value_limit(0, cap));
  EXPECT_EQ(default_request_memory(64ull << 20), 8ull << 20);
  EXPECT_EQ(default_request_memory(16ull << 20), 4ull << 20);
  EXPECT_EQ(default_request_memory(64ull << 30), 1ull << 30);
}

}  // namespace
}  // namespace sluice::serve
