// hub/http_experts.h — routed experts fetched over HTTP on first use, then served from disk.
//
// A stream-mode install (see http_setup.h) has every shard as a sparse local
// file holding the header and the spine; the routed experts' byte ranges are
// holes that are never read. This ExpertSource gets each expert span from the
// on-disk span cache (hub/span_cache.h) if it is there and still matches its
// checksum, else with one HTTP Range request for exactly that span, which it
// then stores in the cache. The spans of one layer are fetched in parallel by
// a pool of worker threads, each with its own keep-alive connection; retries
// and backoff are the HttpClient's. Bytes are identical to a full install's,
// so the model's output is too.
//
// The hub answers a file URL with a redirect to its CDN; the URL it redirects
// to is remembered per shard and asked directly (without the token, which is
// for the hub only) until it stops working, so a span costs one request, not
// two. A shard that is whole on disk (marked "local" in the stream manifest)
// is read with pread instead.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "checkpoint/checkpoint.h"
#include "hub/http_client.h"
#include "hub/setup_manifest.h"
#include "io/expert_source.h"

namespace sluice {

struct StreamConfig {
  StreamManifest manifest;
  std::string cache_dir;     // where spans are cached
  std::string bearer_token;  // hub/hf_env.h: HF_TOKEN or the token file
  // Told about each retry of a span request (HttpOptions::on_retry; called on
  // the workers' threads): a hub that is down is a wait the user should see.
  RetryHook on_retry;
};

// DIR/.sluice-stream.json, DIR/.span-cache and the hub token (store/hf_env.h).
StreamConfig load_stream_config(const std::string& model_dir, RetryHook on_retry = {});

std::unique_ptr<ExpertSource> make_http_expert_source(const Checkpoint& ck, const StreamConfig& config);

// What a model directory's experts missing from disk come from
// (ModelOptions::miss_filler): HTTP + span cache when DIR/.sluice-stream.json
// exists (a stream-mode install), else nothing (every expert is local).
MissFillerFactory stream_miss_filler(const std::string& model_dir, RetryHook on_retry = {});

struct StreamStats {
  uint64_t spans_requested = 0;  // expert spans asked for by the model
  uint64_t spans_fetched = 0;    // of which fetched over the network
  uint64_t cache_hits = 0;       // of which served from the span cache
  uint64_t local_reads = 0;      // of which read from a whole local shard
  uint64_t network_bytes = 0;    // response body bytes received (retries included)
  uint64_t requests = 0;         // HTTP attempts
  uint64_t retries = 0;
  uint64_t cache_corrupt = 0;    // cache entries that failed their checksum (refetched)
  uint64_t cache_evictions = 0;
  uint64_t cache_store_errors = 0;
  uint64_t cache_bytes = 0;      // bytes in the span cache now
  uint64_t cache_entries = 0;
};

// Fills *out and returns true if `source` is an HTTP expert source or stacked over one.
bool stream_stats(const ExpertSource& source, StreamStats* out);

}  // namespace sluice
