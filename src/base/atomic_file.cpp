#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/file_io.h"

namespace sluice {

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

namespace {

std::string default_temp(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + ".tmp-" + name;
}

}  // namespace

AtomicFile::AtomicFile(std::string path, AtomicFileOptions opt)
    : path_(std::move(path)), temp_(opt.temp.empty() ? default_temp(path_) : std::move(opt.temp)), keep_(opt.resume), sync_(opt.sync) {
  int flags = O_RDWR | O_CREAT | O_CLOEXEC;
  if (!opt.resume) flags |= O_TRUNC;
  if (opt.exclusive) flags |= O_EXCL;
  if (opt.direct) {
    fd_ = ::open(temp_.c_str(), flags | O_DIRECT, 0644);
    direct_ = fd_ >= 0;  // EINVAL: no O_DIRECT on this file system; write buffered
    if (fd_ < 0 && errno != EINVAL) fail(temp_, std::string("cannot create: ") + std::strerror(errno));
  }
  if (fd_ < 0) fd_ = ::open(temp_.c_str(), flags, 0644);
  if (fd_ < 0) fail(temp_, std::string("cannot create: ") + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_ && !keep_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* p, size_t n) {
  write_at(p, n, at_);
  at_ += n;
}

void AtomicFile::write_at(const void* p, uint64_t n, uint64_t offset) {
  write_exact(fd_, p, n, offset, temp_);
}

void AtomicFile::reserve(uint64_t size) {
  const int rc = ::posix_fallocate(fd_, 0, off_t(size));
  if (rc == ENOSPC) fail(path_, "not enough disk space for " + std::to_string(size) + " bytes");
}

void AtomicFile::truncate(uint64_t size) {
  if (::ftruncate(fd_, off_t(size)) != 0) fail(temp_, std::string("cannot truncate: ") + std::strerror(errno));
}

uint64_t AtomicFile::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail(temp_, std::string("cannot stat: ") + std::strerror(errno));
  return uint64_t(st.st_size);
}

void AtomicFile::commit(int64_t expected_size) {
  if (done_ || fd_ < 0) fail(path_, "internal: commit of a file already committed or discarded");
  if (expected_size >= 0 && size() != uint64_t(expected_size))
    fail(path_, "wrote " + std::to_string(size()) + " bytes, expected " + std::to_string(expected_size));
  if (sync_ && ::fsync(fd_) != 0) fail(temp_, std::string("fsync failed: ") + std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail(temp_, std::string("close failed: ") + std::strerror(errno));
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    fail(path_, std::string("cannot rename into place: ") + std::strerror(errno));
  done_ = true;
  if (sync_) fsync_dir(parent_dir(path_));
}

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!done_) ::unlink(temp_.c_str());
  done_ = true;
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile f(path);
  f.write(content.data(), content.size());
  f.commit(int64_t(content.size()));
}

}  // namespace sluice
