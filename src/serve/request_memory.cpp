// serve/request_memory.cpp — the request-handling memory semaphore (serve/request_memory.h).
#include "serve/request_memory.h"

#include <algorithm>

namespace sluice::serve {

uint64_t json_value_limit(uint64_t body_bytes, uint64_t prompt_cap) {
  return prompt_cap + 4096 + body_bytes / 48;
}

uint64_t request_cost(uint64_t body_bytes, uint64_t prompt_cap) {
  return kBytesPerBodyByte * body_bytes + kBytesPerJsonValue * (prompt_cap + 4096);
}

uint64_t largest_body(uint64_t memory, uint64_t prompt_cap) {
  const uint64_t fixed = request_cost(0, prompt_cap);
  return memory > fixed ? (memory - fixed) / kBytesPerBodyByte : 0;
}

uint64_t default_request_memory(uint64_t ram_budget) {
  return std::clamp<uint64_t>(ram_budget / 8, 4ull << 20, 1ull << 30);
}

bool RequestMemory::take(uint64_t n, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (n > capacity_) return false;
  if (!cv_.wait_for(lock, wait, [&] { return capacity_ - used_ >= n; })) return false;
  used_ += n;
  return true;
}

void RequestMemory::give(uint64_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= std::min(n, used_);
  }
  cv_.notify_all();
}

uint64_t RequestMemory::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

MemoryGrant& MemoryGrant::operator=(MemoryGrant&& o) noexcept {
  if (this != &o) {
    release();
    m_ = o.m_;
    n_ = o.n_;
    o.m_ = nullptr;
  }
  return *this;
}

bool MemoryGrant::take(uint64_t more, std::chrono::milliseconds wait) {
  if (!m_ || !m_->take(more, wait)) return false;
  n_ += more;
  return true;
}

void MemoryGrant::release() {
  if (m_) m_->give(n_);
  m_ = nullptr;
}

}  // namespace sluice::serve
