// serve/scheduler.h — up to `running` generations at a time; the rest wait in arrival order.
//
// The server decodes at most --parallel N sequences together (serve/decoder.h),
// so requests take turns: join() gives a place in line, or refuses when
// `capacity` (N running + max_waiting) places are taken, which the server
// answers with 429. The first N of the line may generate. A Ticket leaves the
// line when destroyed, whether it ran, gave up waiting, or its client left.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace sluice::serve {

class Scheduler;

class Ticket {
 public:
  Ticket() = default;
  Ticket(Scheduler* s, uint64_t id) : s_(s), id_(id) {}
  Ticket(Ticket&& o) noexcept : s_(o.s_), id_(o.id_) { o.s_ = nullptr; }
  Ticket& operator=(Ticket&& o) noexcept;
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  ~Ticket() { leave(); }

  // Waits up to `slice` for this ticket to reach the front (the first `running`); true once it has.
  bool wait_turn(std::chrono::milliseconds slice);
  void leave();
  bool valid() const { return s_ != nullptr; }

 private:
  Scheduler* s_ = nullptr;
  uint64_t id_ = 0;
};

class Scheduler {
 public:
  explicit Scheduler(int max_waiting, int running = 1) : max_waiting_(max_waiting), running_(running) {}

  // A place at the back of the line; nullopt when the line is full or closed.
  std::optional<Ticket> join();
  // From now on join() refuses everyone (shutdown); those in line stay.
  void close();
  bool closed() const;

  size_t in_line() const;  // running + waiting
  size_t waiting() const;  // in line behind the running ones
  int max_waiting() const { return max_waiting_; }

 private:
  friend class Ticket;
  bool wait_front(uint64_t id, std::chrono::milliseconds slice);
  void leave(uint64_t id);

  const int max_waiting_, running_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint64_t> line_;
  uint64_t next_id_ = 1;
  bool closed_ = false;
};

}  // namespace sluice::serve
