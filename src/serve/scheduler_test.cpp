// Scheduler: FIFO turns, the admission limit, leaving from the middle, close().
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sluice::serve {
namespace {

using std::chrono::milliseconds;

TEST(Scheduler, AdmitsOneRunningPlusTheQueueInOrder) {
  Scheduler s(2);
  std::optional<Ticket> a = s.join(), b = s.join(), c = s.join();
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(s.join());  // 1 running + 2 waiting
  EXPECT_EQ(s.in_line(), 3u);
  EXPECT_TRUE(a->wait_turn(milliseconds(0)));
  EXPECT_FALSE(b->wait_turn(milliseconds(10)));
  EXPECT_FALSE(c->wait_turn(milliseconds(0)));
  c.reset();  // leaving from the middle of the line frees a place
  EXPECT_EQ(s.in_line(), 2u);
  std::optional<Ticket> d = s.join();
  ASSERT_TRUE(d);
  a->leave();
  EXPECT_TRUE(b->wait_turn(milliseconds(0)));
  EXPECT_FALSE(d->wait_turn(milliseconds(0)));
  b.reset();
  EXPECT_TRUE(d->wait_turn(milliseconds(0)));
  s.close();
  EXPECT_FALSE(s.join());
  EXPECT_TRUE(d->wait_turn(milliseconds(0)));  // those in line stay
}

TEST(Scheduler, ZeroQueueMeansOnlyTheRunningOne) {
  Scheduler s(0);
  std::optional<Ticket> a = s.join();
  ASSERT_TRUE(a);
  EXPECT_FALSE(s.join());
  Ticket moved = std::move(*a);
  a.reset();  // the moved-from ticket leaves nothing
  EXPECT_EQ(s.in_line(), 1u);
  moved.leave();
  EXPECT_TRUE(s.join());
}

TEST(Scheduler, ThreadsRunOneAtATimeInArrivalOrder) {
  Scheduler s(16);
  std::vector<Ticket> tickets;
  for (int i = 0; i < 8; i++) tickets.push_back(std::move(*s.join()));
  std::vector<int> order;
  std::atomic<int> running{0};
  bool overlap = false;
  std::vector<std::thread> threads;
  for (int i = 7; i >= 0; i--)  // started in reverse: the line decides the order
    threads.emplace_back([&, i] {
      Ticket t = std::move(tickets[size_t(i)]);
      while (!t.wait_turn(milliseconds(5))) {
      }
      if (running.fetch_add(1) != 0) overlap = true;
      order.push_back(i);
      std::this_thread::sleep_for(milliseconds(2));
      running.fetch_sub(1);
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(s.in_line(), 0u);
}

TEST(Scheduler, TheFirstNRunTogetherAndTheQueueWaitsBehindThem) {
  Scheduler s(1, 3);
  std::optional<Ticket> a = s.join(), b = s.join(), c = s.join(), d = s.join();
  ASSERT_TRUE(a && b && c && d);
  EXPECT_FALSE(s.join());  // 3 running + 1 waiting
  EXPECT_TRUE(a->wait_turn(milliseconds(0)));
  EXPECT_TRUE(b->wait_turn(milliseconds(0)));
  EXPECT_TRUE(c->wait_turn(milliseconds(0)));
  EXPECT_FALSE(d->wait_turn(milliseconds(0)));
  EXPECT_EQ(s.waiting(), 1u);
  b.reset();  // one leaves: the next one runs at once
  EXPECT_TRUE(d->wait_turn(milliseconds(0)));
  EXPECT_EQ(s.waiting(), 0u);
}

}  // namespace
}  // namespace sluice::serve
