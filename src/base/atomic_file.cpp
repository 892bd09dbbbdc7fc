#include "base/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
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

// The temps being written now (not resumable ones: a download's .part is
// kept for the next run), for remove_temps_on_signal's handler: lock-free
// slots, read from a signal handler. A temp beyond the slots is left to the
// next run's remove_dead_temps.
constexpr int kTrackedTemps = 256;
std::atomic<const char*> g_temps[kTrackedTemps];
const char* g_command = "sluice";

void track_temp(const char* path) {
  for (auto& slot : g_temps) {
    const char* empty = nullptr;
    if (slot.compare_exchange_strong(empty, path)) return;
  }
}

void untrack_temp(const char* path) {
  for (auto& slot : g_temps) {
    const char* mine = path;
    if (slot.compare_exchange_strong(mine, nullptr)) return;
  }
}

void say(const char* s) {
  if (::write(2, s, std::strlen(s)) < 0) {}  // nothing to do if stderr is gone
}

extern "C" void on_stop_signal(int sig) {
  for (auto& slot : g_temps)
    if (const char* p = slot.load()) ::unlink(p);
  say("\nsluice: ");
  say(g_command);
  say(sig == SIGINT ? ": interrupted (SIGINT)" : ": stopped by SIGTERM");
  say("; unfinished temporary files removed, run it again to go on\n");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void remove_temps_on_signal(const char* command) {
  g_command = command;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
  // Past the file size limit (ulimit -f) a write fails with EFBIG and the
  // error names the file, instead of the process dying with no word.
  ::signal(SIGXFSZ, SIG_IGN);
}

int remove_dead_temps(const std::string& dir, const std::string& prefix) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = pid_t(std::stol(digits));
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;  // its writer runs
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0) removed++;
  }
  ::closedir(d);
  return removed;
}

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
  if (!keep_) track_temp(temp_.c_str());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!keep_) untrack_temp(temp_.c_str());
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
  if (!keep_) untrack_temp(temp_.c_str());  // from here the temp's name is the final file's
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
