#include "hub/setup_drives.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "base/error.h"
#include "base/run_jobs.h"
#include "checkpoint/shard_stamp.h"
#include "hub/http_client.h"
#include "hub/setup_manifest.h"
#include "hub/verify_install.h"

namespace sluice {

namespace {

namespace fs = std::filesystem;

// Each shard of ck as the stream manifest names it (URL, size, the hub's oid).
std::vector<StreamShard> remote_shards(const Checkpoint& ck, const StreamManifest& sm) {
  std::vector<StreamShard> out;
  for (const std::string& path : ck.shard_paths) {
    const StreamShard* found = find_stream_shard(sm, base_name(path));
    if (!found) fail(path, std::string("not in ") + kStreamManifestName);
    out.push_back(*found);
  }
  return out;
}

// A reader of shards' bytes from the hub, one HTTP connection of its own.
ShardReader hub_reader(const HttpOptions& http, const std::vector<StreamShard>& shards) {
  auto client = std::make_shared<HttpClient>(http);
  return [client, &shards](int file, uint64_t offset, uint8_t* dst, uint64_t n) {
    const StreamShard& s = shards[size_t(file)];
    client->get_range(s.url, offset, n, s.size, [&](uint64_t pos, const uint8_t* data, size_t len) {
      if (pos < offset || pos - offset + len > n) fail(s.url, "the hub sent bytes outside the range asked for");
      std::memcpy(dst + (pos - offset), data, len);
    });
  };
}

// The shards (indexes) whose sha256 read through the stripe is not the hub's,
// `jobs` shards at a time.
std::vector<size_t> shards_differing(const std::string& dir, const std::vector<StreamShard>& remote, int jobs) {
  Checkpoint through = open_checkpoint(dir, {.allow_unknown = true});
  const StripeUse u = apply_stripe(through, /*spine=*/false);
  const auto spans = moved_expert_spans(through, u);
  std::mutex mu;
  std::vector<size_t> bad;
  run_jobs(remote.size(), jobs, [&] {
    return [&](size_t i) {
      if (remote[i].sha256.empty()) return;  // nothing to compare with
      if (moved_shard_sha256(through, spans[i], i) == remote[i].sha256) return;
      std::lock_guard<std::mutex> lock(mu);
      bad.push_back(i);
    };
  });
  std::sort(bad.begin(), bad.end());  // named in shard order
  return bad;
}

// The setup manifest of a stream install made a full one: each shard whole,
// checked against the hub's oid (through the stripe), no stream manifest.
void record_full_install(const std::string& dir, const std::vector<StreamShard>& remote) {
  SetupManifest m;
  if (!read_setup_manifest(dir, &m)) fail(dir, std::string("no ") + kSetupManifestName + " after setup");
  m.mode = "full";
  for (const StreamShard& s : remote) {
    ManifestFile& f = m.files[s.name];
    f.size = s.size;
    f.sha256 = s.sha256;
    f.checked = s.sha256.empty() ? "none" : "lfs-sha256";
    f.spine_only = false;
    f.spine_sha256.clear();
    f.spine_bytes = 0;
    m.planned[s.name].spine_only = false;
  }
  write_setup_manifest(dir, m);
  fs::remove(dir + "/" + kStreamManifestName);
  fs::remove_all(dir + "/" + kSpanCacheDirName);  // spans a stream run cached: on the drives now
}

}  // namespace

DrivesSetupResult run_setup_to_drives(const SetupOptions& options, const std::vector<StripeDrive>& drives, int copies,
                                      const std::function<void(const SetupProgress&)>& on_progress,
                                      const std::function<void(uint64_t, uint64_t)>& stripe_progress) {
  if (options.mode != SetupMode::full) fail("--drives", "needs --full (a stream install's experts stay on the hub)");
  if (!options.include.empty() || !options.exclude.empty())
    fail("--drives", "installs the whole checkpoint: no --include or --exclude");
  const std::string& dir = options.dest;
  // A finished install (every shard whole in the manifest, the stripe moved)
  // was checked when it finished: a rerun checks only what it writes.
  SetupManifest before;
  bool finished = fs::exists(dir) && read_setup_manifest(dir, &before) && before.mode == "full" && stripe_moved(dir);
  for (const auto& [name, f] : before.files) finished = finished && !f.spine_only;

  DrivesSetupResult r;
  SetupOptions shards = options;  // the header and the spine of every shard, experts' ranges holes
  shards.mode = SetupMode::stream;
  r.setup = run_setup(shards, on_progress);

  const Checkpoint ck = open_checkpoint(dir, {.allow_unknown = options.allow_unknown});
  const std::vector<StreamShard> remote = remote_shards(ck, read_stream_manifest(dir));
  r.shards = int(remote.size());
  const bool moved = stripe_moved(dir);
  for (const StreamShard& s : remote)
    if (s.local && !moved)
      fail(dir + "/" + s.name, "is already installed whole: lay its experts over the drives with `sluice stripe --model " +
                                   dir + " --drives ... --move` instead");
  StripeSource source;
  source.jobs = options.jobs;
  source.shards_are_holes = true;
  source.make_reader = [&] { return hub_reader(options.http, remote); };
  r.stripe = write_stripe(ck, drives, copies, stripe_progress, /*spine=*/false, /*move=*/false, &source);

  if (!(finished && r.stripe.up_to_date)) {
    const std::vector<size_t> bad = shards_differing(dir, remote, options.jobs);
    if (!bad.empty()) {  // their experts' drive files go, and the stripe: the next run fetches them again
      const Stripe s = read_stripe(dir);
      std::string names;
      for (size_t i : bad) names += (names.empty() ? "" : ", ") + remote[i].name;
      for (const StripeFile& f : s.files)
        for (int e : f.experts)
          for (size_t i : bad)
            if (ck.experts[size_t(f.layer)][size_t(e)].file == int(i)) fs::remove(f.path);
      fs::remove(stripe_manifest_path(dir));
      fail(dir, names + ": sha256 read through the drives differs from the hub's; the drive files holding their "
                        "experts were removed: run setup again to fetch them");
    }
    r.checked = 0;
    for (const StreamShard& s : remote) r.checked += !s.sha256.empty();
  }
  record_full_install(dir, remote);
  return r;
}

}  // namespace sluice
