#include "base/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/file_io.h"

namespace sluice {

int open_regular_file(const std::string& path, int extra_flags) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, S_ISDIR(st.st_mode) ? "is a directory, not a file" : "is not a regular file");
  }
  // Back to blocking reads (O_NONBLOCK only guarded the open).
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes) {
  const int fd = open_regular_file(path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  const uint64_t size = uint64_t(st.st_size);
  if (size > max_bytes)
    fail(path, "file of " + std::to_string(size) + " bytes is larger than the " + std::to_string(max_bytes) +
                   " this file may have");
  std::string text(size, '\0');
  if (size > 0) read_exact(fd, text.data(), size, 0, path);
  return text;
}

}  // namespace sluice
