// base/read_exact.h — a plain pread of exactly n bytes, or an error naming the
// file, the offset and what went wrong (short file, I/O error). EINTR retried.
// For small reads (headers, vectors, rows); bulk reads go through SpanReader.
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path);
// Opens `path`, reads, closes.
void read_exact(const std::string& path, void* dst, uint64_t n, uint64_t offset);

}  // namespace sluice
