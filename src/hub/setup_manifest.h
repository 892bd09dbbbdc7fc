// hub/setup_manifest.h — the two small JSON files `sluice setup` leaves in a model directory.
//
// DIR/.sluice-setup.json  what setup set out to install (the planned files, as
//                         the hub listed them) and what it installed: per file its size and sha256
//                         and how the download was checked (the hub's LFS oid,
//                         the git blob id, or nothing to check against). A
//                         stream-mode shard is "spine only": the sha256 of its
//                         local bytes (header + spine, in offset order) is
//                         recorded instead, since the hub's oid covers experts
//                         that were never downloaded. `sluice verify` rechecks
//                         all of it; a rerun of setup skips files listed here
//                         with the right size.
// DIR/.sluice-stream.json present only for a stream-mode install: where to
//                         fetch missing expert spans (one URL per shard, pinned
//                         to the commit when the hub named one), the shards'
//                         sizes, and the run-time knobs (cache bound,
//                         connections, timeouts). Its presence makes
//                         open_model() read experts over HTTP.
// Both are written atomically (temp + rename).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

inline constexpr const char* kSetupManifestName = ".sluice-setup.json";
inline constexpr const char* kStreamManifestName = ".sluice-stream.json";
inline constexpr const char* kPartialDirName = ".partial";
inline constexpr const char* kSpanCacheDirName = ".span-cache";

struct ManifestFile {
  uint64_t size = 0;
  std::string sha256;        // of the whole file; for a spine-only shard the hub's oid (not local bytes)
  std::string git_blob;      // the hub's git blob id, when it gave one
  std::string checked;       // "lfs-sha256", "git-blob" or "none": what the download was compared with
  bool spine_only = false;   // a stream-mode shard: experts are holes
  std::string spine_sha256;  // spine_only: sha256 of the header and spine bytes in offset order
  uint64_t spine_bytes = 0;
};

// A file the last setup set out to install (the hub's list, filtered by mode).
struct PlannedFile {
  uint64_t size = 0;
  std::string sha256, git_blob;  // as the hub listed them
  bool spine_only = false;       // stream mode: header + spine of a shard
};

struct SetupManifest {
  std::string hub, repo, revision, commit;
  std::string mode;  // "full" or "stream": the last setup's mode
  std::map<std::string, PlannedFile> planned;
  std::map<std::string, ManifestFile> files;  // installed and checked
};

// Reads DIR/.sluice-setup.json; false if there is none. Throws if it is malformed.
bool read_setup_manifest(const std::string& dir, SetupManifest* out);
void write_setup_manifest(const std::string& dir, const SetupManifest& m);

struct StreamShard {
  std::string name;      // file name in DIR
  std::string url;
  uint64_t size = 0;
  std::string sha256;    // the hub's LFS oid, if known (tells a re-setup whether cached spans still hold)
  bool local = false;    // the whole file is on disk (an earlier full install): read experts locally
};

struct StreamManifest {
  std::string hub, repo, revision, commit;
  std::vector<StreamShard> shards;
  uint64_t max_cache_bytes = 0;  // 0: unbounded
  int connections = 8;           // spans fetched in parallel
  int stall_timeout_s = 30;
  int retries = 6;
  int backoff_ms = 250;
};

// The shard of that file name, or nullptr.
const StreamShard* find_stream_shard(const StreamManifest& m, const std::string& name);

bool stream_manifest_exists(const std::string& dir);
// Reads DIR/.sluice-stream.json; throws naming the file if absent or malformed.
StreamManifest read_stream_manifest(const std::string& dir);
void write_stream_manifest(const std::string& dir, const StreamManifest& m);

// DIR/.partial/<shard>.sparse.json, beside a stream-mode shard being fetched:
// {"size", "header_sha256", "runs_done"}, the spine runs already on disk.
std::string stream_progress_json(uint64_t size, const std::string& header_sha256, size_t runs_done);
// The runs a progress file says are done, if it records this download (the
// same shard size and header sha256), at most `runs`; 0 (start over) for
// anything else, a malformed file included.
size_t read_stream_progress(std::string_view text, uint64_t size, const std::string& header_sha256, size_t runs);

}  // namespace sluice
