#include "serve/scheduler.h"

#include <algorithm>

namespace sluice::serve {

Ticket& Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    leave();
    s_ = o.s_;
    id_ = o.id_;
    o.s_ = nullptr;
  }
  return *this;
}

bool Ticket::wait_turn(std::chrono::milliseconds slice) { return s_ && s_->wait_front(id_, slice); }

void Ticket::leave() {
  if (s_) s_->leave(id_);
  s_ = nullptr;
}

std::optional<Ticket> Scheduler::join() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || line_.size() >= size_t(max_waiting_) + size_t(running_)) return std::nullopt;
  uint64_t id = next_id_++;
  line_.push_back(id);
  return Ticket(this, id);
}

void Scheduler::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

bool Scheduler::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

size_t Scheduler::in_line() const {
  std::lock_guard<std::mutex> lock(mu_);
  return line_.size();
}

size_t Scheduler::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return line_.size() > size_t(running_) ? line_.size() - size_t(running_) : 0;
}

bool Scheduler::wait_front(uint64_t id, std::chrono::milliseconds slice) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, slice, [&] {
    const size_t n = std::min(line_.size(), size_t(running_));
    return std::find(line_.begin(), line_.begin() + ptrdiff_t(n), id) != line_.begin() + ptrdiff_t(n);
  });
}

void Scheduler::leave(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(line_.begin(), line_.end(), id);
    if (it != line_.end()) line_.erase(it);
  }
  cv_.notify_all();
}

}  // namespace sluice::serve
