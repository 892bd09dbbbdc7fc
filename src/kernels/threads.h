// kernels/threads.h — the kernel thread pool: persistent workers that split a
// range [0, n) into contiguous chunks, the calling thread taking one of them.
//
// Built for the hot path (one call every 10-100 µs): after a job a worker spins
// briefly on the job counter, then sleeps on a condition variable; the caller
// spins until every chunk is done. Chunking is static and deterministic, but
// kernels must not depend on it anyway (each output is computed by one thread
// in a fixed order, so results never depend on the thread count).
//
// Concurrency: the pool runs one job at a time. parallel_for may be called from
// any thread; a call that finds the pool busy (another thread's job, or a call
// nested inside a job) runs its whole range inline on the calling thread.
// set_num_threads must not race with parallel_for from another thread.
// The pool is created on first use and joined at exit.
#pragma once
#include <cstdint>

namespace sluice::kernels {

// Sets the number of threads parallel_for uses, the caller included.
// n <= 0 means the number of CPUs this process may run on.
void set_num_threads(int n);
int num_threads();

// Calls fn(ctx, begin, end) on contiguous chunks that cover [0, n), at most
// num_threads() of them, concurrently; returns when all are done. Chunk i of k
// is [n·i/k, n·(i+1)/k). If a chunk throws, the first exception is rethrown
// here after every chunk has finished.
using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);
void parallel_for(int64_t n, RangeFn fn, void* ctx);

// Same, for any callable f(int64_t begin, int64_t end) (a lambda); no allocation.
template <class F>
void parallel_for(int64_t n, const F& f) {
  parallel_for(
      n, [](void* ctx, int64_t b, int64_t e) { (*static_cast<const F*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace sluice::kernels
