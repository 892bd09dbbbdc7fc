// hub/http_setup.h — install a checkpoint from a hub: in full, or as a stream.
//
// Full: every file of the revision is downloaded (several at a time) into
//   DEST/.partial/<file>.part, hashed as it arrives, compared with the hub's
//   LFS sha256 (or git blob id for small files), and only then renamed into
//   DEST/<file>. A rerun resumes each part from its size (re-hashing what is
//   there, then Range from there) and skips files the setup manifest lists
//   with the right size and hash.
// Stream: small files are downloaded as above; for each *.safetensors shard
//   the safetensors header is read with two Range requests, and only the
//   header and the spine (every tensor that is not a routed expert, in runs of
//   adjacent tensors) are fetched, at their original offsets in a sparse file
//   of the shard's full size. Expert ranges stay holes: open_checkpoint() and
//   the spine loader work unchanged on DEST, and the engine fetches experts on
//   demand (hub/http_experts.h) as DEST/.sluice-stream.json directs.
//   Interrupted shards resume at the first spine run not yet complete.
//
// Before fetching anything the free space of DEST is checked (statvfs) against
// what is still to come. Nothing partial ever appears under a final name.
// The library never prints: progress goes to a callback on the caller's thread.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "hub/http_client.h"
#include "hub/http_hub.h"

namespace sluice {

enum class SetupMode { full, stream };

struct SetupOptions {
  HubRepo source;                 // hub URL, org/name, revision
  std::string dest;
  SetupMode mode = SetupMode::full;
  int jobs = 4;                   // files (or shards) fetched at once
  bool check_space = true;
  HttpOptions http;               // token, timeouts, retries (also recorded for stream run time)
  uint64_t max_cache_bytes = 0;   // stream: span cache bound, 0 = unbounded
  int connections = 8;            // stream: spans fetched at once at run time
  // Which of the repository's files to install: those matching any `include`
  // glob (all when none is given) and no `exclude` glob. fnmatch(3) patterns
  // on the file's path in the repository ('*' also crosses '/'). A full
  // install of selected files is not required to open as a checkpoint.
  std::vector<std::string> include, exclude;
  // The installed model may ask for features the engine does not implement
  // (checkpoint/checkpoint.h); otherwise setup fails at the end, naming them.
  bool allow_unknown = false;
};

// True when `name` passes the include/exclude globs of `opt`.
bool setup_selects(const SetupOptions& opt, const std::string& name);

struct SetupProgress {
  uint64_t total_bytes = 0;    // bytes the install holds when done (stream: headers + spine)
  uint64_t done_bytes = 0;     // of which on disk now
  uint64_t fetched_bytes = 0;  // received in this run (the rate is fetched_bytes / seconds)
  int files_total = 0, files_done = 0;
  double seconds = 0;
  bool final = false;          // the last call
};

struct SetupResult {
  std::string commit;
  int files_fetched = 0;       // downloaded (in full or spine) in this run
  int files_skipped = 0;       // already complete
  uint64_t bytes_fetched = 0;  // response bytes received in this run
  uint64_t remote_expert_bytes = 0;  // stream: expert bytes left on the server
};

// Runs the whole setup. Throws sluice::Error when anything fails (after the
// other files finished; the message names the first failure and counts the rest).
SetupResult run_setup(const SetupOptions& options, const std::function<void(const SetupProgress&)>& on_progress);

// A byte range [offset, offset + length) of a shard.
struct ByteRun {
  uint64_t offset = 0, length = 0;
};

// True for a routed expert's tensor: "...block_sparse_moe.experts.<n>.<part>".
bool is_routed_expert_tensor(const std::string& name);
// The spine of a shard: its non-expert tensors merged into runs of adjacent
// tensors (no expert byte inside a run), in offset order.
std::vector<ByteRun> spine_runs(const ShardHeader& header);

}  // namespace sluice
