// The io_uring engine of SpanReader (io/read_engine.h): one ring of
// queue_depth entries; an op's slot travels as the entry's user data.
#include <liburing.h>

#include <cerrno>
#include <string>

#include "base/error.h"
#include "io/read_engine.h"
#include "io/span_reader.h"

namespace sluice {

namespace {

__kernel_timespec timeout_spec(int timeout_ms) { return {timeout_ms / 1000, (timeout_ms % 1000) * 1000000LL}; }

class UringEngine final : public ReadEngine {
 public:
  io_uring ring{};
  bool ready = false;  // the ring was set up (and must be torn down)
  int unsubmitted = 0;

  ~UringEngine() override {
    if (ready) io_uring_queue_exit(&ring);
  }
  const char* name() const override { return "io_uring"; }

  void queue(int op, int fd, uint8_t* buf, uint64_t len, uint64_t off) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (!sqe) {  // cannot happen: in-flight ops never exceed the ring size
      submit();
      sqe = io_uring_get_sqe(&ring);
      if (!sqe) fail("span reader", "io_uring submission queue full");
    }
    io_uring_prep_read(sqe, fd, buf, unsigned(len), off);
    io_uring_sqe_set_data64(sqe, uint64_t(op));
    unsubmitted++;
  }

  int submit() override {
    while (unsubmitted > 0) {
      const int r = io_uring_submit(&ring);
      if (r == -EINTR || r == -EAGAIN || r == -EBUSY) continue;
      if (r == 0) break;  // nothing taken now; the next wait submits them
      if (r < 0) return r;
      unsubmitted -= r;
    }
    return 0;
  }

  int reap(bool block, int timeout_ms, std::vector<OpResult>& out) override {
    io_uring_cqe* cqe = nullptr;
    if (block) {
      for (;;) {
        __kernel_timespec ts = timeout_spec(timeout_ms);
        const int r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
        if (r == -EINTR) continue;
        if (r < 0) return r;  // -ETIME: nothing finished in time
        break;
      }
    }
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      out.push_back({int(io_uring_cqe_get_data64(cqe)), int64_t(cqe->res)});
      seen++;
    }
    io_uring_cq_advance(&ring, seen);
    return 0;
  }

  bool drain(int in_flight, int timeout_ms) override {
    while (in_flight > 0) {
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec ts = timeout_spec(timeout_ms);
      const int r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
      if (r == -EINTR) continue;
      if (r < 0) return false;  // a stalled device may still write into the buffers
      io_uring_cqe_seen(&ring, cqe);
      in_flight--;
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<ReadEngine> make_uring_engine(int queue_depth) {
  auto e = std::make_unique<UringEngine>();
  if (io_uring_queue_init(unsigned(queue_depth), &e->ring, 0) != 0) return nullptr;
  e->ready = true;
  return e;
}

bool io_uring_available() {
  io_uring ring{};
  if (io_uring_queue_init(2, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

}  // namespace sluice
