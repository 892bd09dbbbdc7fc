// base/atomic_file.h — the one way sluice replaces a file: write a temp file
// beside it, fsync the temp, rename it over the final name, fsync the
// directory. A reader sees the old file or the whole new one, never a part,
// and after a crash the rename is not visible before the bytes are.
//
// Until commit() succeeds nothing has touched the final name. A writer that
// fails (a full disk, an exception) leaves the old file as it was, and the
// temp is removed when the AtomicFile dies, unless it was opened `resume`
// (a download's .part file, continued by the next run).
//
// Writers: checkpoint shards and small files (write_file_atomic), the span
// cache, spine packs, setup's downloads and progress files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

struct AtomicFileOptions {
  // The temp file's path; empty: DIR/.tmp-NAME beside the final file. Put it
  // on the same file system as the final file (rename does not cross one).
  std::string temp;
  // Try O_DIRECT (aligned buffers, lengths and offsets); a file system that
  // refuses it (tmpfs) is written buffered: see direct().
  bool direct = false;
  // Keep what the temp already holds (no truncation), and keep the temp when
  // not committed: a resumable download.
  bool resume = false;
  // Fail if the temp exists (several writers may pick the same final name;
  // each brings its own unique temp name).
  bool exclusive = false;
  // fsync the temp and the directory at commit. Off only where a torn file
  // is harmless because every reader verifies the bytes (the span cache:
  // its names carry the sha256), and a sync per entry would cost.
  bool sync = true;
};

class AtomicFile {
 public:
  // Creates (or, resume, opens) the temp file; throws naming it if it cannot.
  explicit AtomicFile(std::string path, AtomicFileOptions opt = {});
  // Not committed: closes the temp and removes it (kept when `resume`).
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  bool direct() const { return direct_; }
  // Bytes written by write() so far (where the next one goes).
  uint64_t at() const { return at_; }

  // Writes n bytes at at() and advances it; throws on a short write or error.
  void write(const void* p, size_t n);
  // Moves at() n bytes on, leaving them to a later write_at (an index that
  // precedes the data it indexes).
  void skip(uint64_t n) { at_ += n; }
  // Writes n bytes at `offset` (at() unchanged); throws on error.
  void write_at(const void* p, uint64_t n, uint64_t offset);
  // Reserves `size` bytes up front, so a full disk fails now rather than
  // minutes in (file systems without fallocate: no reservation).
  void reserve(uint64_t size);
  // Sets the temp's size (cuts an O_DIRECT tail, or truncates a download).
  void truncate(uint64_t size);
  // The temp's size now.
  uint64_t size() const;

  // fsync the temp, close it, rename it to path(), fsync the directory
  // (the syncs unless opened with sync = false).
  // expected_size >= 0: fails first unless the temp holds exactly that many bytes.
  void commit(int64_t expected_size = -1);
  // Removes the temp now, whatever `resume` says (a download that failed its hash).
  void discard();

 private:
  std::string path_, temp_;
  int fd_ = -1;
  bool direct_ = false, keep_ = false, sync_ = true, done_ = false;
  uint64_t at_ = 0;
};

// For commands that write large files (pack, setup): SIGINT and SIGTERM
// remove the temps of the AtomicFiles being written (not resumable ones) and
// end the process with one line naming `command` (a static string), by the
// same signal; SIGXFSZ (past `ulimit -f`) is ignored, so the write fails with
// EFBIG and an error naming the file, and the temp goes as on any failure.
void remove_temps_on_signal(const char* command);

// Removes the files in `dir` named prefix + <pid> whose process no longer
// runs (a writer killed before it could clean up, e.g. by SIGKILL): temps
// named "<final>.tmp.<pid>". Returns how many went.
int remove_dead_temps(const std::string& dir, const std::string& prefix);

// Replaces `path` with `content` through an AtomicFile.
void write_file_atomic(const std::string& path, std::string_view content);

// The directory part of `path` ("." for a bare name).
std::string parent_dir(const std::string& path);

}  // namespace sluice
