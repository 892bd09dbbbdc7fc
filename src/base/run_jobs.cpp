#include "base/run_jobs.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice {

void run_jobs(size_t n, int jobs, const std::function<std::function<void(size_t)>()>& make_work) {
  std::mutex mu;
  size_t next = 0;
  std::exception_ptr failed;
  const auto thread = [&] {
    try {
      const std::function<void(size_t)> work = make_work();
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (failed || next == n) return;
          i = next++;
        }
        work(i);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failed) failed = std::current_exception();
    }
  };
  const int threads = int(std::max<size_t>(1, std::min<size_t>(size_t(std::max(jobs, 1)), n)));
  std::vector<std::thread> others;
  for (int t = 1; t < threads; t++) others.emplace_back(thread);
  thread();
  for (std::thread& t : others) t.join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace sluice
