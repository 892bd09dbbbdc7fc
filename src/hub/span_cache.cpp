#include "hub/span_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_io.h"
#include "hub/sha256.h"

namespace sluice {

namespace {

std::atomic<uint64_t> g_temp_seq{0};

bool parse_int(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// "<anything>.tmp-<pid>-<seq>": the pid of the writer, or -1 if not a temp name.
long temp_owner(const std::string& name) {
  size_t at = name.rfind(".tmp-");
  if (at == std::string::npos) return -1;
  std::string rest = name.substr(at + 5);
  size_t dash = rest.find('-');
  int pid = 0;
  if (!parse_int(rest.substr(0, dash), &pid) || pid <= 0) return -1;
  return pid;
}

bool process_alive(long pid) { return ::kill(pid_t(pid), 0) == 0 || errno == EPERM; }

struct DirFile {
  std::string name;
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
};

std::vector<DirFile> list_dir(const std::string& dir) {
  std::vector<DirFile> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) fail(dir, std::string("cannot open the span cache directory: ") + std::strerror(errno));
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({name, uint64_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  ::closedir(d);
  return out;
}

}  // namespace

std::string span_cache_name(int layer, int expert, const std::string& sha256) {
  return "l" + std::to_string(layer) + "-e" + std::to_string(expert) + "." + sha256;
}

bool parse_span_cache_name(const std::string& name, int* layer, int* expert, std::string* sha256) {
  if (name.size() < 6 || name[0] != 'l') return false;
  size_t dash = name.find("-e"), dot = name.find('.');
  if (dash == std::string::npos || dot == std::string::npos || dash > dot) return false;
  if (!parse_int(name.substr(1, dash - 1), layer) || !parse_int(name.substr(dash + 2, dot - dash - 2), expert))
    return false;
  *sha256 = name.substr(dot + 1);
  return is_hex_digest(*sha256, HashKind::sha256) && name == span_cache_name(*layer, *expert, *sha256);
}

SpanCache::SpanCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {
  if (::mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST)
    fail(dir_, std::string("cannot create the span cache directory: ") + std::strerror(errno));
  std::vector<DirFile> files = list_dir(dir_);
  // Oldest first, so that pushing each to the front leaves the newest there.
  std::sort(files.begin(), files.end(), [](const DirFile& a, const DirFile& b) { return a.mtime_ns < b.mtime_ns; });
  for (const DirFile& f : files) {
    long owner = temp_owner(f.name);
    if (owner > 0) {
      if (!process_alive(owner)) ::unlink((dir_ + "/" + f.name).c_str());
      continue;
    }
    int layer, expert;
    std::string sha;
    if (!parse_span_cache_name(f.name, &layer, &expert, &sha)) continue;
    auto key = std::make_pair(layer, expert);
    if (auto old = entries_.find(key); old != entries_.end()) drop_locked(old);  // an older duplicate
    lru_.push_front(key);
    entries_[key] = Entry{f.name, f.bytes, lru_.begin()};
    stats_.bytes += f.bytes;
  }
  while (max_bytes_ && stats_.bytes > max_bytes_ && !lru_.empty()) {
    drop_locked(entries_.find(lru_.back()));
    stats_.evictions++;
  }
  stats_.entries = entries_.size();
}

void SpanCache::drop_locked(std::map<std::pair<int, int>, Entry>::iterator it) {
  ::unlink((dir_ + "/" + it->second.file).c_str());
  stats_.bytes -= it->second.bytes;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  stats_.entries = entries_.size();
}

bool SpanCache::read(int layer, int expert, uint64_t length, uint8_t* dst) {
  const auto key = std::make_pair(layer, expert);
  std::string file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      stats_.misses++;
      return false;
    }
    file = it->second.file;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  int lay, exp;
  std::string sha;
  parse_span_cache_name(file, &lay, &exp, &sha);
  const std::string path = dir_ + "/" + file;
  bool good = false, gone = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    gone = true;
  } else {
    struct stat st;
    good = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) == length && pread_full(fd, dst, length, 0) &&
           sha256_hex(dst, length) == sha;
    if (good) ::futimens(fd, nullptr);  // recency for the next process
    ::close(fd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (good) {
    stats_.hits++;
    return true;
  }
  stats_.misses++;
  if (!gone) stats_.corrupt++;
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.file == file) {
    if (gone) ::unlink(path.c_str());  // harmless: already gone
    drop_locked(it);
  }
  return false;
}

void SpanCache::store(int layer, int expert, const uint8_t* data, uint64_t length) {
  if (max_bytes_ && length > max_bytes_) return;  // would evict everything and still not fit
  const std::string name = span_cache_name(layer, expert, sha256_hex(data, length));
  const std::string path = dir_ + "/" + name;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_temp_seq++);
  const auto key = std::make_pair(layer, expert);
  // Make room first, so a bounded cache on a small disk does not need the extra span of space.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) drop_locked(it);
    while (max_bytes_ && stats_.bytes + length > max_bytes_ && !lru_.empty()) {
      drop_locked(entries_.find(lru_.back()));
      stats_.evictions++;
    }
  }
  bool ok = true;
  try {
    AtomicFile file(path, {.temp = tmp, .exclusive = true, .sync = false});
    file.write(data, length);
    file.commit();
  } catch (const Error&) {
    ok = false;  // a full disk, say: the span is just not cached (the temp is gone)
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) {
    stats_.store_errors++;
    return;
  }
  if (auto it = entries_.find(key); it != entries_.end()) drop_locked(it);  // stored meanwhile by another thread
  lru_.push_front(key);
  entries_[key] = Entry{name, length, lru_.begin()};
  stats_.bytes += length;
  stats_.stores++;
  stats_.entries = entries_.size();
  while (max_bytes_ && stats_.bytes > max_bytes_ && lru_.size() > 1) {
    drop_locked(entries_.find(lru_.back()));
    stats_.evictions++;
  }
}

SpanCacheStats SpanCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<CacheEntryCheck> check_span_cache(const std::string& dir,
                                              const std::function<int64_t(int, int)>& expected_bytes, bool repair) {
  std::vector<CacheEntryCheck> out;
  std::vector<DirFile> files = list_dir(dir);
  std::sort(files.begin(), files.end(), [](const DirFile& a, const DirFile& b) { return a.name < b.name; });
  std::map<std::pair<int, int>, std::string> seen;
  for (const DirFile& f : files) {
    CacheEntryCheck c;
    c.path = dir + "/" + f.name;
    c.bytes = f.bytes;
    bool ours = true;
    int layer, expert;
    std::string sha;
    if (long owner = temp_owner(f.name); owner > 0) {
      if (process_alive(owner)) continue;  // a write in progress
      c.problem = "temp file left by an interrupted write";
    } else if (!parse_span_cache_name(f.name, &layer, &expert, &sha)) {
      c.problem = "not a span cache entry (left alone)";
      ours = false;
    } else if (int64_t want = expected_bytes(layer, expert); want < 0) {
      c.problem = "layer " + std::to_string(layer) + " has no routed expert " + std::to_string(expert);
    } else if (uint64_t(want) != f.bytes) {
      c.problem = "size " + std::to_string(f.bytes) + ", expected " + std::to_string(want);
    } else if (seen.count({layer, expert})) {
      c.problem = "a second entry for layer " + std::to_string(layer) + " expert " + std::to_string(expert);
    } else {
      std::string got;
      try {
        got = sha256_file(c.path);
      } catch (const Error& e) {
        got = std::string("unreadable: ") + e.what();
      }
      if (got != sha) c.problem = "sha256 mismatch: the bytes no longer match the checksum recorded at fetch";
      else seen[{layer, expert}] = f.name;
    }
    if (!c.problem.empty() && repair && ours) {
      if (::unlink(c.path.c_str()) == 0) c.problem += " [deleted]";
      else c.problem += std::string(" [cannot delete: ") + std::strerror(errno) + "]";
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace sluice
