#include "kernels/threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sluice::kernels {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

int cpus_available() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

// An idle worker spins this long for the next job before it sleeps: longer than
// the gap between two kernel calls of a decode step, short enough not to burn a
// core while the engine waits on disk.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);

// The most threads a pool runs (chunk indices are packed in 16 bits).
constexpr int kMaxThreads = 1024;

// True on a thread that is running a chunk, so nested calls run inline.
thread_local bool t_in_job = false;

// Chunks are claimed, not assigned: whoever is free (the caller included)
// takes the next unclaimed chunk of the current job. The claim word packs the
// job's generation (low 32 bits), its chunk count and the next chunk index, so
// a late worker can never claim a chunk of a job it has not seen, and the
// caller never waits for a worker that has not woken up: it runs that chunk
// itself. Job fields are read only after a successful claim, and a job cannot
// finish (nor the next one be written) while a claimed chunk is running.
inline uint64_t claim_word(uint64_t generation, int chunks, int next) {
  return (generation & 0xffffffffu) << 32 | uint64_t(chunks) << 16 | uint64_t(next);
}

struct Pool {
  std::vector<std::thread> workers;
  std::atomic<bool> busy{false};  // a job is in flight (or set_num_threads runs)

  // The job; written by the caller before `claim` and `generation` move.
  RangeFn fn = nullptr;
  void* ctx = nullptr;
  int64_t n = 0;

  std::atomic<uint64_t> generation{0};  // bumped once per job; wakes workers
  std::atomic<uint64_t> claim{0};       // see claim_word
  std::atomic<int> done{0};             // chunks of this job finished
  std::atomic<bool> stop{false};

  // Sleeping workers; the caller takes the mutex and notifies only when some sleep.
  std::atomic<int> sleepers{0};
  std::mutex sleep_mu;
  std::condition_variable sleep_cv;

  std::mutex error_mu;
  std::exception_ptr error;

  Pool() { start(std::min(cpus_available(), kMaxThreads) - 1); }
  ~Pool() { stop_workers(); }

  void start(int nworkers) {
    stop.store(false);
    // Each worker starts from the generation as of now, so a job published
    // before it first runs is not missed.
    uint64_t g = generation.load();
    for (int i = 0; i < nworkers; i++) workers.emplace_back([this, g] { worker_loop(g); });
  }

  void stop_workers() {
    stop.store(true);
    publish();
    for (auto& t : workers) t.join();
    workers.clear();
  }

  // Moves `generation` (making the job written so far visible) and wakes
  // sleeping workers. Returns the new generation.
  uint64_t publish() {
    uint64_t g = generation.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      // A worker between counting itself a sleeper and waiting holds sleep_mu;
      // taking it here means the notify cannot fall between its check and its wait.
      std::lock_guard<std::mutex> lock(sleep_mu);
      sleep_cv.notify_all();
    }
    return g;
  }

  uint64_t wait_for_job(uint64_t seen) {
    auto start = std::chrono::steady_clock::now();
    for (int spins = 1;; spins++) {
      uint64_t g = generation.load(std::memory_order_acquire);
      if (g != seen) return g;
      if (spins % 64 == 0 && std::chrono::steady_clock::now() - start > kSpinBeforeSleep) break;
      cpu_relax();
    }
    std::unique_lock<std::mutex> lock(sleep_mu);
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint64_t g;
    while ((g = generation.load(std::memory_order_seq_cst)) == seen) sleep_cv.wait(lock);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return g;
  }

  // Claims and runs chunks of job `g` until none is left.
  void work_on(uint64_t g) {
    uint64_t cur = claim.load(std::memory_order_acquire);
    for (;;) {
      if ((cur >> 32) != (g & 0xffffffffu)) return;  // another job by now
      int chunks = int((cur >> 16) & 0xffff), i = int(cur & 0xffff);
      if (i >= chunks) return;
      if (!claim.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        continue;
      run_chunk(i, chunks);
      done.fetch_add(1, std::memory_order_release);
      cur = claim.load(std::memory_order_acquire);
    }
  }

  void run_chunk(int i, int chunks) {
    int64_t q = n / chunks, r = n % chunks;
    int64_t begin = i * q + (i < r ? i : r);
    int64_t end = begin + q + (i < r ? 1 : 0);
    t_in_job = true;
    try {
      fn(ctx, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
    t_in_job = false;
  }

  void worker_loop(uint64_t seen) {
    for (;;) {
      seen = wait_for_job(seen);
      if (stop.load(std::memory_order_acquire)) return;
      work_on(seen);
    }
  }

  void run(int64_t n_, RangeFn fn_, void* ctx_) {
    fn = fn_;
    ctx = ctx_;
    n = n_;
    int64_t threads = int64_t(workers.size()) + 1;
    int chunks = int(n_ < threads ? n_ : threads);
    error = nullptr;
    done.store(0, std::memory_order_relaxed);
    uint64_t g = generation.load(std::memory_order_relaxed) + 1;
    claim.store(claim_word(g, chunks, 0), std::memory_order_release);
    publish();
    work_on(g);
    for (int spins = 1; done.load(std::memory_order_acquire) != chunks; spins++) {
      if (spins < 4096)
        cpu_relax();
      else
        std::this_thread::yield();  // a worker holding a chunk was descheduled
    }
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void set_num_threads(int n) {
  if (t_in_job) throw Error("kernels::set_num_threads: called from inside parallel_for");
  if (n <= 0) n = cpus_available();
  if (n > kMaxThreads) n = kMaxThreads;
  Pool& p = pool();
  while (p.busy.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  if (int(p.workers.size()) != n - 1) {
    p.stop_workers();
    p.start(n - 1);
  }
  p.busy.store(false, std::memory_order_release);
}

int num_threads() { return int(pool().workers.size()) + 1; }

void parallel_for(int64_t n, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  Pool& p = pool();
  if (n == 1 || t_in_job || p.workers.empty() ||
      p.busy.exchange(true, std::memory_order_acquire)) {
    fn(ctx, 0, n);  // nested, concurrent or trivial: run inline
    return;
  }
  p.run(n, fn, ctx);
  std::exception_ptr error = p.error;
  p.error = nullptr;
  p.busy.store(false, std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

}  // namespace sluice::kernels
