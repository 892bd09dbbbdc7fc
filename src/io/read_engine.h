// io/read_engine.h — the two ways SpanReader (io/span_reader.h) gets its reads
// done: io_uring (io/uring_engine.cpp) and pread on worker threads
// (io/pread_engine.cpp, where io_uring is refused: seccomp, gVisor, old
// kernels). SpanReader does all the bookkeeping (chunks, retries, short reads,
// errors); an engine only moves one read at a time between it and the kernel.
//
// A read is identified by its op slot (0..queue_depth-1); SpanReader never has
// more than queue_depth reads queued or in flight. Not thread safe: the owning
// SpanReader's thread calls every method.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace sluice {

// One finished read: its op slot, and the bytes read or -errno.
struct OpResult {
  int op = 0;
  int64_t res = 0;
};

class ReadEngine {
 public:
  virtual ~ReadEngine() = default;
  virtual const char* name() const = 0;  // "io_uring" or "pread"
  // Queues a read of `len` bytes at `off` of `fd` into `buf` for op slot `op`.
  virtual void queue(int op, int fd, uint8_t* buf, uint64_t len, uint64_t off) = 0;
  // Hands the queued reads to the kernel: 0, or -errno (the engine is broken).
  virtual int submit() = 0;
  // Appends finished reads to `out`. block: first waits up to timeout_ms for
  // one. Returns 0, -ETIME when that wait saw nothing, or another -errno.
  virtual int reap(bool block, int timeout_ms, std::vector<OpResult>& out) = 0;
  // Shutting down with `in_flight` reads outstanding: returns once none can
  // write into their buffers any more; false if the device stalled (then the
  // caller must never free those buffers).
  virtual bool drain(int in_flight, int timeout_ms) = 0;
};

// nullptr when this process may not use io_uring.
std::unique_ptr<ReadEngine> make_uring_engine(int queue_depth);
std::unique_ptr<ReadEngine> make_pread_engine(int threads);

}  // namespace sluice
