// io/page_cache.h — checks that sluice's reads leave the page cache clean.
//
// Expert bytes must never sit in the kernel's page cache: they would evict the
// spine and hide the true cost of a read. resident_pages() asks the kernel
// (mincore over a read-only mapping, which faults nothing in) how many pages
// of a file range are cached right now; tests and the bench call it after
// reading. drop_cached_pages() evicts one file's clean pages (fadvise
// DONTNEED) so a test can start from a known state; it never touches other
// files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace sluice {

inline constexpr uint64_t kWholeFile = ~uint64_t(0);

// Pages of [offset, offset+length) of `path` that are in the page cache; the
// range is clipped to the file. Throws naming the file if it cannot be mapped.
size_t resident_pages(const std::string& path, uint64_t offset = 0, uint64_t length = kWholeFile);

// Page size the counts above are in.
size_t page_bytes();

// Writes back and drops `path`'s cached pages (its own pages only).
void drop_cached_pages(const std::string& path);

}  // namespace sluice
