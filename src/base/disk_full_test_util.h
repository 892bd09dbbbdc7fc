// base/disk_full_test_util.h — a full disk for tests, without a small file
// system: while a DiskFullAfter lives, no file of this process may grow past
// `bytes` (RLIMIT_FSIZE; SIGXFSZ ignored), so a write beyond fails with EFBIG
// the way it would with ENOSPC. Each test runs in its own process (ctest), and
// the old limit comes back at scope exit.
#pragma once
#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <stdexcept>

namespace sluice::testing {

struct DiskFullAfter {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  explicit DiskFullAfter(uint64_t bytes) {
    if (::getrlimit(RLIMIT_FSIZE, &old) != 0) throw std::runtime_error("getrlimit failed");
    old_handler = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old;
    lim.rlim_cur = rlim_t(bytes);
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) throw std::runtime_error("setrlimit failed");
  }
  ~DiskFullAfter() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
  }
  DiskFullAfter(const DiskFullAfter&) = delete;
  DiskFullAfter& operator=(const DiskFullAfter&) = delete;
};

}  // namespace sluice::testing
