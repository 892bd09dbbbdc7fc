// io/test_util.h — helpers shared by io/ tests: a scratch directory on a
// real file system and files of known pseudo-random bytes.
//
// Scratch files live on a disk-backed file system: the build directory if it
// is one, else /var/tmp or /tmp. The page-cache tests need that: on tmpfs a
// file's pages are always resident and O_DIRECT means nothing.
#pragma once
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/span_reader.h"

namespace sluice::testing {

// io_uring is used when asked for, allowed here, and not vetoed by SLUICE_NO_URING.
inline bool uring_expected(bool wanted) {
  const char* veto = std::getenv("SLUICE_NO_URING");
  return wanted && io_uring_available() && !(veto && *veto && std::strcmp(veto, "0") != 0);
}

inline std::vector<uint8_t> pattern_bytes(uint64_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = uint8_t(x >> 24);
  }
  return v;
}

struct ScratchDir {
  std::string path;
  static bool in_memory(const std::string& dir) {
    struct statfs fs {};
    if (statfs(dir.c_str(), &fs) != 0) return true;
    return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
  }
  ScratchDir() {
    std::string base = std::filesystem::path(SLUICE_BINARY).parent_path().string();
    for (std::string c : {base, std::string("/var/tmp"), std::string("/tmp")}) {
      if (!in_memory(c) && access(c.c_str(), W_OK) == 0) {
        base = c;
        break;
      }
    }
    std::string tmpl = base + "/store-test-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed in " + base);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::string p = path + "/" + name;
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create " + p);
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) {
        close(fd);
        throw std::runtime_error("cannot write " + p);
      }
      done += size_t(n);
    }
    close(fd);
    return p;
  }
};

// Deterministic generator for test choices (std distributions differ across
// standard libraries; this does not).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint64_t next() {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};

}  // namespace sluice::testing
