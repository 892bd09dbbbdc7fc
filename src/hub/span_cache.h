// hub/span_cache.h — the on-disk cache of expert spans fetched over HTTP.
//
// One file per span in the cache directory, named
//   l<layer>-e<expert>.<sha256 of the bytes>
// so the checksum recorded at first fetch travels with the bytes: an entry is
// published by one rename of a complete temp file ("<name>.tmp-<pid>-<seq>",
// base/atomic_file.h), and a reader recomputes the sha256 and compares it
// with the name. A torn or rotted entry therefore can never be served; it is
// deleted and counted, and the caller fetches the span again. No fsync: a
// crash can lose an entry but not make a wrong one pass.
//
// The cache is bounded by max_bytes (0: unbounded): storing a span first
// evicts least recently used entries. Recency survives restarts as the files'
// mtimes (a hit touches its file). Temp files of processes that no longer run
// are removed when the cache is opened. Thread safe: the HTTP expert source's
// workers read and store concurrently; bytes are read and hashed outside the
// lock. Several processes may share a directory safely (entries are immutable
// and published atomically), but each bounds only what it has seen.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sluice {

struct SpanCacheStats {
  uint64_t hits = 0, misses = 0, stores = 0, evictions = 0;
  uint64_t corrupt = 0;        // entries whose bytes no longer matched their sha256 (deleted)
  uint64_t store_errors = 0;   // stores that failed (disk full, ...); the span was served anyway
  uint64_t bytes = 0;          // bytes held now
  uint64_t entries = 0;
};

class SpanCache {
 public:
  SpanCache(std::string dir, uint64_t max_bytes);

  // Reads the entry for (layer, expert) into dst (length bytes) and checks it.
  // False if there is none, or it was bad (wrong size or checksum: deleted).
  bool read(int layer, int expert, uint64_t length, uint8_t* dst);
  // Stores a span, evicting LRU entries first. Never throws: a failed store is counted.
  void store(int layer, int expert, const uint8_t* data, uint64_t length);

  SpanCacheStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    std::string file;   // name inside dir_
    uint64_t bytes = 0;
    std::list<std::pair<int, int>>::iterator lru;
  };
  void drop_locked(std::map<std::pair<int, int>, Entry>::iterator it);

  std::string dir_;
  uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::pair<int, int>, Entry> entries_;
  std::list<std::pair<int, int>> lru_;  // front: most recently used
  SpanCacheStats stats_;
};

// What `sluice verify` needs: every file in a cache directory, checked.
struct CacheEntryCheck {
  std::string path;
  uint64_t bytes = 0;
  std::string problem;  // empty when good
};
// Checks every entry: its name, its size (expected_bytes(layer, expert); a
// negative answer means no such expert) and its sha256. With `repair`, deletes
// bad entries and temp files left by processes that died; other files are
// reported and left alone.
std::vector<CacheEntryCheck> check_span_cache(const std::string& dir,
                                              const std::function<int64_t(int layer, int expert)>& expected_bytes,
                                              bool repair);

// Parses "l<layer>-e<expert>.<64 hex>"; false for anything else.
bool parse_span_cache_name(const std::string& name, int* layer, int* expert, std::string* sha256);
std::string span_cache_name(int layer, int expert, const std::string& sha256);

}  // namespace sluice
