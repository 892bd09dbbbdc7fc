// base/file_io.h — the file operations the rest builds on, each written once:
// exact reads and writes (EINTR retried; a short read is an error), a range
// read in chunks (hashing a range), and syncing a directory after a rename.
// The throwing forms fail with `sluice: <path>: <problem>` (base/error.h);
// the bool forms are for callers that recover (a cache entry is just dropped).
// Small reads (headers, vectors, rows) and writes only; bulk reads go through
// io/span_reader.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace sluice {

// Reads exactly n bytes at `offset`; false on an I/O error or a short file.
bool pread_full(int fd, void* dst, uint64_t n, uint64_t offset);
// The same, or an error naming the file, the offset and what went wrong.
void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path);
// Opens `path`, reads, closes.
void read_exact(const std::string& path, void* dst, uint64_t n, uint64_t offset);
// Reads [offset, offset + n) in chunks of at most 4 MiB, handing each to `chunk` in order.
void read_range(int fd, uint64_t offset, uint64_t n, const std::string& path,
                const std::function<void(const uint8_t* data, size_t len)>& chunk);

// Writes exactly n bytes at `offset`; false on an error (a full disk included).
bool pwrite_full(int fd, const void* src, uint64_t n, uint64_t offset);
// The same, or an error naming the file.
void write_exact(int fd, const void* src, uint64_t n, uint64_t offset, const std::string& path);

// An open file descriptor, closed on scope exit (-1: none).
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Makes a rename in `dir` durable (best effort: a file system without
// directory fsync just skips it).
void fsync_dir(const std::string& dir);

}  // namespace sluice
