// io/page_cache.cpp — mincore()-based residency count, per-file DONTNEED.
#include "io/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"

namespace sluice {

size_t page_bytes() { return size_t(sysconf(_SC_PAGESIZE)); }

size_t resident_pages(const std::string& path, uint64_t offset, uint64_t length) {
  Fd f{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(f.fd, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  uint64_t size = uint64_t(st.st_size);
  if (offset >= size) return 0;
  uint64_t end = length > size - offset ? size : offset + length;
  const uint64_t page = page_bytes();
  uint64_t map_start = offset / page * page;
  uint64_t map_len = end - map_start;
  // A mapping faults nothing in by itself; mincore only reports.
  void* m = mmap(nullptr, map_len, PROT_READ, MAP_SHARED, f.fd, off_t(map_start));
  if (m == MAP_FAILED) fail(path, std::string("cannot map for mincore: ") + std::strerror(errno));
  std::vector<unsigned char> vec((map_len + page - 1) / page);
  int r = mincore(m, map_len, vec.data());
  int e = errno;
  munmap(m, map_len);
  if (r != 0) fail(path, std::string("mincore: ") + std::strerror(e));
  size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

void drop_cached_pages(const std::string& path) {
  Fd f{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  fdatasync(f.fd);  // dirty pages cannot be dropped
  posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
}

}  // namespace sluice
