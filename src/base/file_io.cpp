#include "base/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/read_fault.h"

namespace sluice {

bool pread_full(int fd, void* dst, uint64_t n, uint64_t offset) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, p + got, n - got, off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += uint64_t(r);
  }
  return true;
}

void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, p + got, n - got, off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    r = ssize_t(read_fault(path, offset + got, n - got, r < 0 ? -int64_t(errno) : int64_t(r)));
    if (r < 0 || r == 0) {
      const std::string what = r < 0 ? "read error at offset " + std::to_string(offset + got) + ": " + std::strerror(int(-r))
                                     : "truncated: short read at offset " + std::to_string(offset + got) + " (wanted " +
                                           std::to_string(n) + " bytes from " + std::to_string(offset) + ")";
      note_read_failure(path + ": " + what);
      fail(path, what);
    }
    got += uint64_t(r);
  }
}

void read_exact(const std::string& path, void* dst, uint64_t n, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  try {
    read_exact(fd, dst, n, offset, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void read_range(int fd, uint64_t offset, uint64_t n, const std::string& path,
                const std::function<void(const uint8_t*, size_t)>& chunk) {
  std::vector<uint8_t> buf(size_t(std::min<uint64_t>(n, 4u << 20)));
  for (uint64_t done = 0; done < n;) {
    const size_t want = size_t(std::min<uint64_t>(buf.size(), n - done));
    read_exact(fd, buf.data(), want, offset + done, path);
    chunk(buf.data(), want);
    done += want;
  }
}

bool pwrite_full(int fd, const void* src, uint64_t n, uint64_t offset) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  uint64_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd, p + done, n - done, off_t(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      return false;
    }
    done += uint64_t(w);
  }
  return true;
}

void write_exact(int fd, const void* src, uint64_t n, uint64_t offset, const std::string& path) {
  if (!pwrite_full(fd, src, n, offset)) fail(path, std::string("write failed: ") + std::strerror(errno));
}

Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace sluice
