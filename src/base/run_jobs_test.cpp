// base/run_jobs.h: every job once, each thread's own work function, the first failure rethrown.
#include "base/run_jobs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace sluice {
namespace {

TEST(RunJobs, EveryJobOnceOnItsThreadsOwnWork) {
  std::vector<std::atomic<int>> ran(100);
  std::atomic<int> made{0};
  run_jobs(ran.size(), 4, [&] {
    made++;
    return [&](size_t i) { ran[i]++; };
  });
  for (const auto& r : ran) EXPECT_EQ(r.load(), 1);
  EXPECT_GE(made.load(), 1);
  EXPECT_LE(made.load(), 4);
  run_jobs(0, 4, [&] { return [&](size_t) { FAIL() << "no job to run"; }; });
}

TEST(RunJobs, AFailureStopsNewJobsAndIsRethrown) {
  std::atomic<int> started{0};
  const auto fail_at_3 = [&] {
    return [&](size_t i) {
      started++;
      if (i == 3) throw std::runtime_error("job 3");
    };
  };
  EXPECT_THROW(run_jobs(1000, 1, fail_at_3), std::runtime_error);
  EXPECT_EQ(started.load(), 4) << "one thread: no job after the failure";
  started = 0;
  EXPECT_THROW(run_jobs(1000, 4, fail_at_3), std::runtime_error);  // others may have taken the rest meanwhile
  EXPECT_THROW(run_jobs(5, 3, []() -> std::function<void(size_t)> { throw std::runtime_error("no reader"); }),
               std::runtime_error);
}

}  // namespace
}  // namespace sluice
