// bench/sampler/sampler.cpp — a wall-clock sampling profiler of a process's
// main thread, loaded with LD_PRELOAD (the GPU machines have no perf):
//
//   g++ -O2 -fPIC -shared -o sampler.so bench/sampler/sampler.cpp
//   SAMPLER_OUT=/tmp/p LD_PRELOAD=$PWD/sampler.so build/sluice bench ...
//   python3 bench/sampler/fold.py /tmp/p.<pid> build/sluice 'Session::step'
//
// A timer (CLOCK_MONOTONIC, SAMPLER_HZ, default 2000) signals the main thread
// only; the handler stores the thread's backtrace. Wall clock, not CPU time:
// a wait for a read or a GPU call shows where it blocks. At exit the file
// SAMPLER_OUT.<pid> gets one "S <ns> <n> <pc>..." line per sample, then the
// process's /proc/self/maps ("M ..."), which fold.py needs to symbolize.
// Only executables whose path contains "sluice" are sampled (so `timeout`
// or a shell in front of the command is left alone).
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kMaxSamples = 400000, kMaxFrames = 20;
void* frames[kMaxSamples][kMaxFrames];
unsigned char depth[kMaxSamples];
long long when_ns[kMaxSamples];
volatile int taken = 0;
bool sampling = false;
timer_t timer;

void on_tick(int, siginfo_t*, void*) {
  const int i = taken;
  if (i >= kMaxSamples) return;
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  when_ns[i] = t.tv_sec * 1000000000LL + t.tv_nsec;
  depth[i] = static_cast<unsigned char>(backtrace(frames[i], kMaxFrames));
  taken = i + 1;
}

void write_samples() {
  if (!sampling) return;
  timer_delete(timer);
  char name[4096];
  std::snprintf(name, sizeof name, "%s.%d", std::getenv("SAMPLER_OUT"), int(getpid()));
  FILE* f = std::fopen(name, "w");
  if (!f) return;
  for (int i = 0; i < taken; i++) {
    std::fprintf(f, "S %lld %d", when_ns[i], depth[i]);
    for (int k = 0; k < depth[i]; k++) std::fprintf(f, " %p", frames[i][k]);
    std::fputc('\n', f);
  }
  if (FILE* m = std::fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, m)) std::fprintf(f, "M %s", line);
    std::fclose(m);
  }
  std::fclose(f);
}

__attribute__((constructor)) void start() {
  if (!std::getenv("SAMPLER_OUT")) return;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = 0;
  if (!std::strstr(exe, "sluice")) return;
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder now, not inside the signal handler
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_tick;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGRTMIN + 3, &sa, nullptr);
  sigevent se;
  std::memset(&se, 0, sizeof se);
  se.sigev_notify = SIGEV_THREAD_ID;
  se.sigev_signo = SIGRTMIN + 3;
  se._sigev_un._tid = int(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &se, &timer) != 0) return;
  const char* hz = std::getenv("SAMPLER_HZ");
  const long period = 1000000000L / (hz ? std::max(1, std::atoi(hz)) : 2000);
  itimerspec it{{0, period}, {0, period}};
  timer_settime(timer, 0, &it, nullptr);
  sampling = true;
  std::atexit(write_samples);
}

}  // namespace
