// serve/request_memory.h — the memory the server sets aside for handling requests,
// as a semaphore on bytes.
//
// A request's body, its parsed JSON and its prompt before tokenizing stops all
// live beside the model, and a body may be megabytes (--max-request-bytes): 16
// bodies of 7 MiB parsed at once were a gigabyte. So each request is charged
// what handling its body can take (request_cost()) before it is read, out of a
// fixed amount the memory plan reserved (ModelOptions::extra_bytes); a request
// that cannot be charged waits a moment for others to finish, then is answered
// 503 with Retry-After, and one that could never fit is answered 413. The
// charge is given back once the prompt is tokenized: what a generation keeps
// (its tokens, its state) the plan reserves elsewhere.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace sluice::serve {

// What handling a body of `body_bytes` may take: the body, the parsed JSON (its
// strings, the parser's buffer) and the rendered prompt text, each about the
// body's size, plus kBytesPerJsonValue for each JSON value it may hold
// (json_value_limit()).
inline constexpr uint64_t kBytesPerBodyByte = 6;
inline constexpr uint64_t kBytesPerJsonValue = 96;
// JSON values (numbers, strings, arrays, objects, members) a request may hold: a
// token-id prompt of `prompt_cap` ids and 4096 more, plus one per 48 body bytes
// (2 of the 6 bytes per body byte pay for them). More is refused (413) while parsing.
uint64_t json_value_limit(uint64_t body_bytes, uint64_t prompt_cap);
uint64_t request_cost(uint64_t body_bytes, uint64_t prompt_cap);
// The largest body whose request_cost() fits in `memory` (0: none does).
uint64_t largest_body(uint64_t memory, uint64_t prompt_cap);
// The default reservation for a --ram-budget: an eighth of it, between 4 MiB and 1 GiB.
uint64_t default_request_memory(uint64_t ram_budget);

class RequestMemory {
 public:
  explicit RequestMemory(uint64_t capacity) : capacity_(capacity) {}
  RequestMemory(const RequestMemory&) = delete;
  RequestMemory& operator=(const RequestMemory&) = delete;

  // Takes n bytes, waiting up to `wait` for others to give theirs back; false if
  // they did not come (or n is more than the capacity).
  bool take(uint64_t n, std::chrono::milliseconds wait);
  void give(uint64_t n);
  uint64_t capacity() const { return capacity_; }
  uint64_t in_use() const;

 private:
  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t used_ = 0;
};

// Bytes taken from a RequestMemory, given back when it is destroyed or released.
class MemoryGrant {
 public:
  MemoryGrant() = default;
  MemoryGrant(RequestMemory* m, uint64_t n) : m_(m), n_(n) {}
  MemoryGrant(MemoryGrant&& o) noexcept : m_(o.m_), n_(o.n_) { o.m_ = nullptr; }
  MemoryGrant& operator=(MemoryGrant&& o) noexcept;
  MemoryGrant(const MemoryGrant&) = delete;
  MemoryGrant& operator=(const MemoryGrant&) = delete;
  ~MemoryGrant() { release(); }
  // Takes `more` bytes besides those held (RequestMemory::take); false if they did not come.
  bool take(uint64_t more, std::chrono::milliseconds wait);
  void release();
  uint64_t bytes() const { return m_ ? n_ : 0; }

 private:
  RequestMemory* m_ = nullptr;
  uint64_t n_ = 0;
};

}  // namespace sluice::serve
