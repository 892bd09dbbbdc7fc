// io/span_reader.cpp — SpanReader's bookkeeping, over one of the engines of
// io/read_engine.h (io_uring, or pread worker threads).
//
// A Request is one submitted span; it is cut into Ops (chunks of its aligned
// superset), at most queue_depth of which are in flight. Both engines report
// each op's result as (op, res) with res = bytes or -errno, and one function
// (on_op_done) handles short reads, retries and errors for both.
// A request finishes when none of its ops is in flight any more, so a failed
// span never frees or hands back a buffer the kernel is still writing.
#include "io/span_reader.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "base/clock.h"
#include "base/error.h"
#include "base/read_fault.h"
#include "io/read_engine.h"

namespace sluice {

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string span_text(uint64_t offset, uint64_t length) {
  return "span at offset " + std::to_string(offset) + " length " + std::to_string(length);
}

// A buffered descriptor for spans: readahead off (FADV_RANDOM), so the kernel
// reads exactly the span and the DONTNEED after it leaves nothing behind.
// (With readahead on, up to read_ahead_kb past every span stays cached.)
int open_buffered(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  return fd;
}

// Every file read here is share-locked while open: `stripe --move` frees a
// shard's expert bytes only under an exclusive lock, so never under a process
// that may read them from the shard (best effort: a failure is ignored).
int share_locked(int fd) {
  if (fd >= 0) ::flock(fd, LOCK_SH | LOCK_NB);
  return fd;
}

struct FileEntry {
  std::string path;
  int fd = -1;
  bool direct = false;
  uint64_t size = 0;
  bool reopen = false;  // a read failed: reopen the path before the next read
  int device = 0;       // whose queue its reads take (SpanReaderOptions::device_depths)
  uint64_t bytes_read = 0;
};

// Another file holding the same span (submit_copies): chunks may come from it.
struct Copy {
  int file = 0;
  uint64_t astart = 0;  // its aligned start
};

struct Request {
  int file = 0;
  std::vector<Copy> copies;  // other files holding the span; empty: only `file`
  uint64_t offset = 0, length = 0;
  uint64_t astart = 0;    // aligned start in the file
  uint64_t alen = 0;      // aligned superset length
  uint64_t need_end = 0;  // bytes of the superset that hold the span: offset+length-astart
  uint8_t* target = nullptr;   // where the superset is read to
  uint8_t* copy_to = nullptr;  // caller dest when going through a bounce buffer
  AlignedBuffer buffer;        // internal destination or bounce buffer
  bool buffer_goes_to_caller = false;
  uint64_t next_issue = 0;  // superset bytes handed to ops so far
  int ops_running = 0;
  bool urgent = false;
  bool cut = false;  // cut(): nothing more is issued, and no data is handed back
  std::string error;
  int failed_file = -1;  // the file whose read failed
};

struct Op {
  uint64_t ticket = 0;
  int file = 0;  // the request's file or one of its copies
  int device = 0;
  int fd = -1;
  uint64_t start = 0;  // absolute file offset of the chunk
  uint64_t len = 0;    // chunk length (aligned)
  uint64_t need = 0;   // bytes of the chunk that hold span bytes
  uint8_t* buf = nullptr;
  uint64_t done = 0;
  int retries = 0;  // EINTR/EAGAIN/EINVAL restarts, bounded so nothing spins forever
};

struct Result {
  uint64_t ticket = 0;
  const uint8_t* data = nullptr;
  uint64_t length = 0;
  AlignedBuffer owned;
  std::string error;
  int failed_file = -1;
  bool cut = false;
};

}  // namespace

struct SpanReader::Impl {
  SpanReaderOptions opt;
  std::vector<FileEntry> files;
  std::vector<int> retired_fds;  // reopening leaves the old fd to in-flight ops: closed once none is

  std::unique_ptr<ReadEngine> engine;
  bool uring = false;  // engine is the io_uring one

  std::vector<Op> ops;
  std::vector<int> free_ops;
  int ops_in_flight = 0;
  std::vector<int> device_depth;    // per device: its queue depth
  std::vector<int> device_running;  // per device: its reads in flight
  std::vector<uint64_t> device_running_bytes;  // per device: their bytes

  std::unordered_map<uint64_t, Request> requests;
  std::deque<uint64_t> pending;  // tickets with chunks not yet issued, FIFO
  std::deque<Result> results;    // finished, not yet returned
  uint64_t next_ticket = 1;

  std::vector<AlignedBuffer> bounce_pool;
  ReadStats stats;
  uint64_t busy_since = 0;
  uint64_t depth_since = 0;  // when ops_in_flight last changed (for depth_ns)

  // Integrates ops_in_flight over time up to now; call before it changes.
  void account_depth() {
    const uint64_t t = steady_ns();
    if (depth_since) stats.depth_ns += uint64_t(ops_in_flight) * (t - depth_since);
    depth_since = t;
  }
  bool broken = false;

  ~Impl() { shutdown(); }

  void start() {
    if (opt.queue_depth < 1 || opt.queue_depth > 4096)
      fail("span reader", "queue_depth must be in 1..4096, got " + std::to_string(opt.queue_depth));
    if (opt.chunk_bytes % kIoAlign != 0 || opt.chunk_bytes > (1ull << 30))
      fail("span reader", "chunk_bytes must be a multiple of 4096 and at most 1 GiB");
    if (opt.chunk_bytes == 0) opt.chunk_bytes = 1ull << 30;
    if (env_flag("SLUICE_NO_URING")) opt.use_io_uring = false;
    if (env_flag("SLUICE_NO_DIRECT")) opt.use_direct = false;
    device_depth = {opt.queue_depth};
    for (int d : opt.device_depths) {
      if (d < 1 || d > 4096) fail("span reader", "a device's queue depth must be in 1..4096, got " + std::to_string(d));
      device_depth.push_back(d);
    }
    device_running.assign(device_depth.size(), 0);
    device_running_bytes.assign(device_depth.size(), 0);
    int total = 0;
    for (int d : device_depth) total += d;
    ops.resize(size_t(total));
    for (int i = total - 1; i >= 0; i--) free_ops.push_back(i);
    if (opt.use_io_uring) engine = make_uring_engine(total);
    uring = engine != nullptr;
    if (!engine) engine = make_pread_engine(opt.pread_threads);
  }

  void shutdown() {
    // Wait for ops still in flight: their buffers must outlive the reads.
    if (engine) {
      if (!engine->drain(ops_in_flight, opt.timeout_ms)) leak_buffers();  // a stalled device may still write into them
      engine.reset();
    }
    for (auto& f : files)
      if (f.fd >= 0) close(f.fd);
    for (int fd : retired_fds) close(fd);
    files.clear();
    retired_fds.clear();
  }

  // After a stall the kernel may still write into our buffers: never free them.
  void leak_buffers() {
    static auto* graveyard = new std::vector<AlignedBuffer>();  // reachable: no leak report
    for (auto& [t, r] : requests)
      if (!r.buffer.empty()) graveyard->push_back(std::move(r.buffer));
  }

  int add_file(const std::string& path, int device) {
    if (device < 0 || device >= int(device_depth.size()))
      fail(path, "span reader: no device " + std::to_string(device) + " (" + std::to_string(device_depth.size()) + " devices)");
    FileEntry f;
    f.path = path;
    f.device = device;
    if (opt.use_direct) {
      f.fd = share_locked(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
      f.direct = f.fd >= 0;
      if (f.fd < 0 && errno != EINVAL) fail(path, std::string("cannot open: ") + std::strerror(errno));
    }
    if (f.fd < 0) {
      f.fd = share_locked(open_buffered(path));
      if (f.fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    }
    struct stat st {};
    if (fstat(f.fd, &st) != 0) {
      int e = errno;
      close(f.fd);
      fail(path, std::string("cannot stat: ") + std::strerror(e));
    }
    f.size = uint64_t(st.st_size);
    files.push_back(std::move(f));
    return int(files.size()) - 1;
  }

  // After a failed read: opens the path again (it may have been repaired or
  // replaced), keeping the old descriptor if that fails (tried again next time).
  void reopen(FileEntry& f) {
    int fd = share_locked(f.direct ? open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : open_buffered(f.path));
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) == 0) f.size = uint64_t(st.st_size);
    retired_fds.push_back(f.fd);
    f.fd = fd;
    f.reopen = false;
  }

  void close_retired() {
    for (int fd : retired_fds) close(fd);
    retired_fds.clear();
  }

  // Reopens a file without O_DIRECT after the file system refused a direct
  // read; false if that fails too.
  bool make_buffered(int file) {
    FileEntry& f = files[size_t(file)];
    if (!f.direct) return true;
    int fd = share_locked(open_buffered(f.path));
    if (fd < 0) return false;
    retired_fds.push_back(f.fd);
    f.fd = fd;
    f.direct = false;
    return true;
  }

  void check_usable() const {
    if (broken) fail("span reader", "unusable after an earlier stall; destroy it");
  }

  uint64_t submit(int file, uint64_t offset, uint64_t length, std::span<uint8_t> dest, bool urgent,
                  std::span<const FileSpan> copies = {}) {
    check_usable();
    if (file < 0 || file >= int(files.size()))
      fail("span reader", "submit: no file with id " + std::to_string(file));
    if (offset + length < offset)
      fail(files[size_t(file)].path, "submit: " + span_text(offset, length) + " overflows");
    uint64_t ticket = next_ticket++;
    Request r;
    r.file = file;
    r.offset = offset;
    r.length = length;
    if (length == 0) {
      results.push_back({ticket, dest.empty() ? nullptr : dest.data(), 0, {}, {}});
      return ticket;
    }
    r.astart = align_down(offset, kIoAlign);
    r.alen = direct_bytes(offset, length);
    r.need_end = offset + length - r.astart;
    if (dest.empty()) {
      r.buffer = take_buffer(r.alen);
      r.target = r.buffer.data();
      r.buffer_goes_to_caller = true;
    } else if (reinterpret_cast<uintptr_t>(dest.data()) % kIoAlign == 0 && dest.size() >= r.alen) {
      r.target = dest.data();
    } else if (dest.size() >= length) {
      r.buffer = take_buffer(r.alen);
      r.target = r.buffer.data();
      r.copy_to = dest.data();
    } else {
      fail(files[size_t(file)].path, "submit: destination of " + std::to_string(dest.size()) +
                                         " bytes is smaller than the " + span_text(offset, length));
    }
    for (const FileSpan& c : copies)
      if (c.file >= 0 && c.file < int(files.size()) && c.file != file && c.length == length &&
          c.offset % kIoAlign == offset % kIoAlign && files[size_t(c.file)].direct && files[size_t(file)].direct)
        r.copies.push_back({c.file, align_down(c.offset, kIoAlign)});
    requests.emplace(ticket, std::move(r));
    if (urgent) {
      // Behind other urgent spans, ahead of the rest (a partly issued
      // speculative span resumes after it).
      auto at = pending.begin();
      while (at != pending.end()) {
        auto q = requests.find(*at);
        if (q != requests.end() && !q->second.urgent) break;
        ++at;
      }
      requests.at(ticket).urgent = true;
      pending.insert(at, ticket);
    } else {
      pending.push_back(ticket);
    }
    pump();
    return ticket;
  }

  bool cancel(uint64_t ticket) {
    auto it = requests.find(ticket);
    if (it == requests.end() || it->second.next_issue > 0 || it->second.ops_running > 0) return false;
    stats.cancelled++;
    stats.bytes_not_read += it->second.alen;
    give_back_buffer(std::move(it->second.buffer));
    requests.erase(it);  // pump() skips its entry in `pending`
    return true;
  }

  bool cut(uint64_t ticket) {
    auto it = requests.find(ticket);
    if (it == requests.end()) return false;
    Request& r = it->second;
    if (r.next_issue == 0 && r.ops_running == 0) return cancel(ticket);
    if (r.next_issue >= r.alen || !r.error.empty()) return false;
    stats.cut++;
    stats.bytes_not_read += r.alen - r.next_issue;
    r.cut = true;
    r.next_issue = r.alen;  // pump() drops it from `pending`; it finishes when its ops land
    if (r.ops_running == 0) finish_request(ticket);
    return true;
  }

  void progress() {
    check_usable();
    if (ops_in_flight > 0) reap(false);
    else pump();
  }

  AlignedBuffer take_buffer(uint64_t size) {
    for (size_t i = 0; i < bounce_pool.size(); i++) {
      if (bounce_pool[i].size() >= size) {
        AlignedBuffer b = std::move(bounce_pool[i]);
        bounce_pool.erase(bounce_pool.begin() + long(i));
        return b;
      }
    }
    return AlignedBuffer(size);
  }

  void give_back_buffer(AlignedBuffer b) {
    if (b.empty()) return;
    if (bounce_pool.size() >= 4) bounce_pool.erase(bounce_pool.begin());  // keep the pool small
    bounce_pool.push_back(std::move(b));
  }

  // Hands chunks of pending requests to free op slots, then submits them: in
  // `pending` order, skipping spans whose device (pick_copy's, with copies)
  // has its queue full (its later spans wait behind them; other devices'
  // spans go ahead).
  void pump() {
    for (auto at = pending.begin(); at != pending.end() && !free_ops.empty();) {
      auto it = requests.find(*at);
      if (it == requests.end() || it->second.next_issue >= it->second.alen) {
        // fully issued, or failed (and perhaps already finished)
        at = pending.erase(at);
        continue;
      }
      Request& r = it->second;
      const uint64_t len = std::min(opt.chunk_bytes, r.alen - r.next_issue);
      const Copy from = pick_copy(r, len);
      if (from.file < 0) {  // the device it should come from has its queue full
        ++at;
        continue;
      }
      const int dev = files[size_t(from.file)].device;
      int i = free_ops.back();
      free_ops.pop_back();
      Op& o = ops[size_t(i)];
      o.ticket = it->first;
      o.file = from.file;
      o.device = dev;
      o.start = from.astart + r.next_issue;
      o.len = len;
      o.need = std::min(o.len, r.need_end - r.next_issue);
      o.buf = r.target + r.next_issue;
      o.done = 0;
      o.retries = 0;
      r.next_issue += o.len;
      r.ops_running++;
      device_running[size_t(dev)]++;
      device_running_bytes[size_t(dev)] += o.len;
      if (r.next_issue >= r.alen) at = pending.erase(at);
      account_depth();
      if (ops_in_flight++ == 0) busy_since = steady_ns();
      issue(i);
    }
    flush();
  }

  double device_weight(int dev) const {
    const double w = size_t(dev) < opt.device_weights.size() ? opt.device_weights[size_t(dev)] : 0;
    return w > 0 ? w : 1.0;
  }

  // Where the next chunk (len bytes) of r is read from: its file, or with
  // copies the one whose device would finish it first (the request's own
  // file on a tie). file -1: that device has its queue full, and the chunk
  // waits for it rather than go to a device that would finish it later (a
  // slow drive with free slots would otherwise take every chunk a fast one
  // has no slot for, and hold the span's end back).
  Copy pick_copy(const Request& r, uint64_t len) const {
    Copy best{-1, 0};
    double soonest = 0;
    auto consider = [&](const Copy& c) {
      const int dev = files[size_t(c.file)].device;
      const double done = double(device_running_bytes[size_t(dev)] + len) / device_weight(dev);
      if (best.file < 0 || done < soonest) best = c, soonest = done;
    };
    consider({r.file, r.astart});
    for (const Copy& c : r.copies) consider(c);
    const int dev = files[size_t(best.file)].device;
    if (device_running[size_t(dev)] >= device_depth[size_t(dev)]) return {-1, 0};
    return best;
  }

  // Starts (or restarts, after a short read) op i from byte `done`.
  void issue(int i) {
    Op& o = ops[size_t(i)];
    FileEntry& f = files[size_t(o.file)];
    if (f.reopen && o.done == 0) reopen(f);
    o.fd = f.fd;
    engine->queue(i, o.fd, o.buf + o.done, o.len - o.done, o.start + o.done);
  }

  void flush() {
    if (const int r = engine->submit(); r < 0) {
      broken = true;
      fail("span reader", std::string(engine->name()) + " submit: " + std::strerror(-r));
    }
  }

  void fail_request(Request& r, int file, const std::string& msg) {
    FileEntry& f = files[size_t(file)];
    if (r.error.empty()) {
      r.error = f.path + ": " + msg;
      r.failed_file = file;
      note_read_failure(r.error);
    }
    f.reopen = true;
    r.next_issue = r.alen;  // issue nothing more for it
  }

  void on_op_done(int i, int64_t res) {
    Op& o = ops[size_t(i)];
    Request& r = requests.at(o.ticket);
    FileEntry& f = files[size_t(o.file)];
    res = read_fault(f.path, o.start + o.done, o.len - o.done, res);
    bool op_over = true;
    if (res < 0) {
      int e = int(-res);
      bool retry = o.retries++ < 100;
      if (retry && (e == EINTR || e == EAGAIN)) {
        op_over = false;
      } else if (retry && e == EINVAL && (f.direct || o.fd != f.fd) && make_buffered(o.file)) {
        // The file system took O_DIRECT at open but refuses the read: go buffered
        // (ops that were already in flight on the direct fd land here too).
        op_over = false;
      } else {
        fail_request(r, o.file, "read of " + span_text(r.offset, r.length) + " failed at file offset " +
                            std::to_string(o.start + o.done) + ": " + std::strerror(e));
      }
    } else {
      o.done += uint64_t(res);
      stats.bytes_read += uint64_t(res);
      f.bytes_read += uint64_t(res);
      if (o.done >= o.len || o.done >= o.need) {
        // complete (a read may stop short past the span, at the end of the file)
      } else if (res == 0 || (f.direct && o.done % kIoAlign != 0)) {
        // End of file before the span's end: O_DIRECT returns a partial block only at EOF.
        struct stat st {};
        std::string now_size = fstat(f.fd, &st) == 0 ? std::to_string(st.st_size) : "unknown";
        fail_request(r, o.file, "short read: " + span_text(r.offset, r.length) +
                            " runs past the end of the file (size now " + now_size + ", " +
                            std::to_string(f.size) + " at open)");
      } else {
        op_over = false;  // partial read: continue where it stopped
      }
    }
    if (!op_over) {
      issue(i);
      return;
    }
    stats.ops++;
    free_ops.push_back(i);
    device_running[size_t(o.device)]--;
    device_running_bytes[size_t(o.device)] -= o.len;
    account_depth();
    if (--ops_in_flight == 0) {
      stats.busy_ns += steady_ns() - busy_since;
      close_retired();  // no read uses an old descriptor any more
    }
    r.ops_running--;
    if (r.ops_running == 0 && r.next_issue >= r.alen) finish_request(o.ticket);
  }

  void finish_request(uint64_t ticket) {
    auto it = requests.find(ticket);
    Request& r = it->second;
    Result res;
    res.ticket = ticket;
    if (r.cut) {
      const FileEntry& f = files[size_t(r.file)];
      if (!f.direct) posix_fadvise(f.fd, off_t(r.astart), off_t(r.alen), POSIX_FADV_DONTNEED);
      res.cut = true;
      give_back_buffer(std::move(r.buffer));
    } else if (r.error.empty()) {
      const FileEntry& f = files[size_t(r.file)];
      if (!f.direct)  // buffered read: keep the page cache clean of these bytes
        posix_fadvise(f.fd, off_t(r.astart), off_t(r.alen), POSIX_FADV_DONTNEED);
      const uint8_t* inner = r.target + (r.offset - r.astart);
      if (r.copy_to) {
        std::memcpy(r.copy_to, inner, r.length);
        stats.bytes_copied += r.length;
        res.data = r.copy_to;
        give_back_buffer(std::move(r.buffer));
      } else {
        res.data = inner;
        if (r.buffer_goes_to_caller) res.owned = std::move(r.buffer);
      }
      res.length = r.length;
      stats.spans++;
      stats.bytes_delivered += r.length;
    } else {
      res.error = r.error;
      res.failed_file = r.failed_file;
      give_back_buffer(std::move(r.buffer));
    }
    results.push_back(std::move(res));
    requests.erase(it);
  }

  // Collects finished ops; blocks for at least one if `block`.
  void reap(bool block) {
    check_usable();
    if (ops_in_flight == 0) {
      pump();
      if (ops_in_flight == 0 && !requests.empty())  // would wait forever: say so instead
        fail("span reader", "internal: spans outstanding but no read in flight");
      return;
    }
    flush();
    std::vector<OpResult> got;
    const int r = engine->reap(block, opt.timeout_ms, got);
    if (r == -ETIME) stalled();
    if (r < 0) {
      broken = true;
      fail("span reader", std::string(engine->name()) + " wait: " + std::strerror(-r));
    }
    for (auto& g : got) on_op_done(g.op, g.res);
    pump();
  }

  [[noreturn]] void stalled() {
    broken = true;
    std::string what = "no read completed in " + std::to_string(opt.timeout_ms) + " ms";
    if (!requests.empty()) {
      const Request& r = requests.begin()->second;
      what += " (waiting on " + files[size_t(r.file)].path + " " + span_text(r.offset, r.length) + ")";
    }
    fail("span reader", what);
  }

  Completed deliver(Result&& r) {
    if (!r.error.empty()) throw SpanError(r.error, r.ticket, r.failed_file);
    Completed c;
    c.ticket = r.ticket;
    c.cut = r.cut;
    c.data = r.data;
    c.length = r.length;
    c.owned = std::move(r.owned);
    return c;
  }

  Completed wait_any() {
    while (results.empty()) {
      if (requests.empty()) fail("span reader", "wait_any: no span outstanding");
      reap(true);
    }
    Result r = std::move(results.front());
    results.pop_front();
    return deliver(std::move(r));
  }

  bool poll(Completed* out) {
    if (results.empty()) reap(false);
    if (results.empty()) return false;
    Result r = std::move(results.front());
    results.pop_front();
    *out = deliver(std::move(r));
    return true;
  }

  Completed wait(uint64_t ticket) {
    for (;;) {
      for (auto it = results.begin(); it != results.end(); ++it) {
        if (it->ticket == ticket) {
          Result r = std::move(*it);
          results.erase(it);
          return deliver(std::move(r));
        }
      }
      if (!requests.count(ticket))
        fail("span reader", "wait: unknown or already returned ticket " + std::to_string(ticket));
      reap(true);
    }
  }
};

SpanReader::SpanReader(const std::vector<std::string>& paths, SpanReaderOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->opt = options;
  impl_->start();
  for (size_t i = 0; i < paths.size(); i++)
    impl_->add_file(paths[i], i < options.file_devices.size() ? options.file_devices[i] : 0);
}

SpanReader::~SpanReader() = default;

int SpanReader::add_file(const std::string& path, int device) { return impl_->add_file(path, device); }
int SpanReader::file_device(int file) const { return impl_->files.at(size_t(file)).device; }
int SpanReader::file_count() const { return int(impl_->files.size()); }
const std::string& SpanReader::path(int file) const { return impl_->files.at(size_t(file)).path; }
uint64_t SpanReader::file_size(int file) const { return impl_->files.at(size_t(file)).size; }
bool SpanReader::file_is_direct(int file) const { return impl_->files.at(size_t(file)).direct; }
bool SpanReader::using_io_uring() const { return impl_->uring; }
const SpanReaderOptions& SpanReader::options() const { return impl_->opt; }

uint64_t SpanReader::direct_bytes(uint64_t offset, uint64_t length) {
  return align_up(offset + length, kIoAlign) - align_down(offset, kIoAlign);
}

uint64_t SpanReader::direct_capacity(uint64_t length) {
  return align_up(length + kIoAlign - 1, kIoAlign);
}

uint64_t SpanReader::submit(int file, uint64_t offset, uint64_t length, std::span<uint8_t> dest, bool urgent) {
  return impl_->submit(file, offset, length, dest, urgent);
}
uint64_t SpanReader::submit_copies(std::span<const FileSpan> copies, std::span<uint8_t> dest, bool urgent) {
  if (copies.empty()) fail("span reader", "submit_copies: no copy given");
  return impl_->submit(copies[0].file, copies[0].offset, copies[0].length, dest, urgent, copies.subspan(1));
}
bool SpanReader::cancel(uint64_t ticket) { return impl_->cancel(ticket); }
bool SpanReader::cut(uint64_t ticket) { return impl_->cut(ticket); }
void SpanReader::progress() { impl_->progress(); }
Completed SpanReader::wait_any() { return impl_->wait_any(); }
bool SpanReader::poll(Completed* out) { return impl_->poll(out); }
Completed SpanReader::wait(uint64_t ticket) { return impl_->wait(ticket); }
int SpanReader::in_flight(int device) const { return impl_->device_running.at(size_t(device)); }

uint64_t SpanReader::queued_bytes(int device) const {
  const Impl& m = *impl_;
  uint64_t n = m.device_running_bytes.at(size_t(device));  // issued chunks, whole
  for (const uint64_t t : m.pending) {  // chunks not yet issued (a span with copies: a share on each)
    auto it = m.requests.find(t);
    if (it == m.requests.end()) continue;
    const Request& r = it->second;
    const uint64_t left = r.alen - std::min(r.alen, r.next_issue);
    uint64_t here = m.files[size_t(r.file)].device == device ? 1 : 0;
    for (const Copy& c : r.copies) here += m.files[size_t(c.file)].device == device ? 1 : 0;
    n += left * here / (r.copies.size() + 1);
  }
  return n;
}
uint64_t SpanReader::file_bytes_read(int file) const { return impl_->files.at(size_t(file)).bytes_read; }
size_t SpanReader::outstanding() const { return impl_->requests.size() + impl_->results.size(); }

ReadStats SpanReader::stats() const {
  ReadStats s = impl_->stats;
  if (impl_->ops_in_flight > 0) s.busy_ns += steady_ns() - impl_->busy_since;
  if (impl_->depth_since) s.depth_ns += uint64_t(impl_->ops_in_flight) * (steady_ns() - impl_->depth_since);
  return s;
}

void SpanReader::reset_stats() {
  impl_->stats = {};
  impl_->busy_since = steady_ns();
  impl_->depth_since = impl_->busy_since;
}

}  // namespace sluice
