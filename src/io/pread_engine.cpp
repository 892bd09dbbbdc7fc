// The pread engine of SpanReader (io/read_engine.h), for processes that may
// not use io_uring: a few worker threads take queued reads in FIFO order,
// each a blocking pread.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "io/read_engine.h"

namespace sluice {

namespace {

struct Job {
  int op = 0;
  int fd = -1;
  uint8_t* buf = nullptr;
  uint64_t len = 0, off = 0;
};

class PreadEngine final : public ReadEngine {
 public:
  explicit PreadEngine(int threads) {
    for (int i = 0; i < threads; i++) workers_.emplace_back([this] { worker_loop(); });
  }
  ~PreadEngine() override { stop(); }
  const char* name() const override { return "pread"; }

  void queue(int op, int fd, uint8_t* buf, uint64_t len, uint64_t off) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back({op, fd, buf, len, off});
    }
    jobs_cv_.notify_one();
  }

  int submit() override { return 0; }  // queue() already handed the read over

  int reap(bool block, int timeout_ms, std::vector<OpResult>& out) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (block && !done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !done_.empty(); }))
      return -ETIME;
    out.insert(out.end(), done_.begin(), done_.end());
    done_.clear();
    return 0;
  }

  // Reads not started are dropped; a worker mid-read finishes it before it joins.
  bool drain(int, int) override {
    stop();
    return true;
  }

 private:
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable jobs_cv_, done_cv_;
  std::deque<Job> jobs_;
  std::vector<OpResult> done_;
  bool stopping_ = false;

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      jobs_.clear();  // not started: nobody writes their buffers
    }
    jobs_cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  void worker_loop() {
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> lock(mu_);
        jobs_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        j = jobs_.front();
        jobs_.pop_front();
      }
      const ssize_t n = ::pread(j.fd, j.buf, j.len, off_t(j.off));
      const int64_t res = n < 0 ? -int64_t(errno) : int64_t(n);
      {
        std::lock_guard<std::mutex> lock(mu_);
        done_.push_back({j.op, res});
      }
      done_cv_.notify_one();
    }
  }
};

}  // namespace

std::unique_ptr<ReadEngine> make_pread_engine(int threads) {
  return std::make_unique<PreadEngine>(std::clamp(threads, 1, 64));
}

}  // namespace sluice
