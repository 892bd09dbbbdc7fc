#include "base/read_exact.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace sluice {

void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, p + got, n - got, off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(path, std::string("read error at offset ") + std::to_string(offset + got) + ": " + std::strerror(errno));
    if (r == 0)
      fail(path, "truncated: short read at offset " + std::to_string(offset + got) + " (wanted " + std::to_string(n) +
                     " bytes from " + std::to_string(offset) + ")");
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

}  // namespace sluice
