#include "hub/http_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_io.h"
#include "checkpoint/checkpoint.h"
#include "hub/setup_manifest.h"
#include "hub/sha256.h"

namespace sluice {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

bool stat_file(const std::string& path, uint64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *size = uint64_t(st.st_size);
  return true;
}

void make_dirs(const std::string& path) {
  std::string cur;
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    cur = path.substr(0, slash);
    if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      fail(cur, "cannot create directory: " + errno_text(errno));
    start = slash + 1;
  }
}

std::string parent_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Publishes a finished part under its final name (sync, rename, sync the directory).
void publish(AtomicFile& part) {
  make_dirs(parent_of(part.path()));
  part.commit();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Weight formats other than safetensors, which stream mode does not fetch.
bool is_other_weight_file(const std::string& name) {
  for (const char* ext : {".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".ot"})
    if (ends_with(name, ext)) return true;
  return false;
}

struct Item {
  const HubFile* file = nullptr;
  bool stream = false;     // fetch header + spine only
  bool skip = false;       // already complete
  uint64_t final_bytes = 0;  // bytes on disk when done (stream: header + spine)
  // Stream shards, after prepare_stream():
  std::string header_bytes;  // the 8-byte length and the JSON
  std::vector<ByteRun> runs;
};

struct Setup {
  const SetupOptions& opt;
  HubRevision rev;
  std::string pin;  // the revision in file URLs: the commit when known
  std::vector<Item> items;

  std::mutex manifest_mu;
  SetupManifest manifest;

  std::atomic<uint64_t> total_bytes{0}, done_bytes{0}, fetched_bytes{0};
  std::atomic<int> files_done{0};

  explicit Setup(const SetupOptions& o) : opt(o) {}

  std::string dest_path(const std::string& name) const { return opt.dest + "/" + name; }
  std::string part_path(const std::string& name) const {
    return opt.dest + "/" + kPartialDirName + "/" + name + ".part";
  }
  // Stream-mode parts are sparse and named apart, so a full download never resumes from one.
  std::string sparse_path(const std::string& name) const {
    return opt.dest + "/" + kPartialDirName + "/" + name + ".sparse";
  }
  std::string sparse_progress_path(const std::string& name) const { return sparse_path(name) + ".json"; }
  std::string url(const std::string& name) const { return hub_file_url(opt.source, pin, name); }

  void record(const std::string& name, const ManifestFile& f) {
    std::lock_guard<std::mutex> lock(manifest_mu);
    manifest.files[name] = f;
    write_setup_manifest(opt.dest, manifest);
  }
};

// Does the manifest entry describe the hub's current file?
bool entry_matches(const ManifestFile& e, const HubFile& f) {
  if (e.size != f.size) return false;
  if (!f.sha256.empty()) return e.sha256 == f.sha256;
  if (!f.git_blob.empty()) return e.git_blob == f.git_blob;
  return !e.sha256.empty();
}

std::string git_blob_prefix(uint64_t size) {
  std::string p = "blob " + std::to_string(size);
  p.push_back('\0');
  return p;
}

// Hashes bytes [0, n) of fd with both hashers.
void hash_prefix(int fd, const std::string& path, uint64_t n, Hasher& a, Hasher& b) {
  read_range(fd, 0, n, path, [&](const uint8_t* p, size_t len) {
    a.update(p, len);
    b.update(p, len);
  });
}

// A file in DEST with the right size but no manifest entry (setup was killed
// between publishing and recording it): hash it instead of downloading again.
bool adopt_existing(Setup& s, const HubFile& f) {
  if (f.sha256.empty() && f.git_blob.empty()) return false;
  const std::string path = s.dest_path(f.name);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return false;
  Hasher sha(HashKind::sha256), blob(HashKind::sha1);
  const std::string pre = git_blob_prefix(f.size);
  blob.update(pre.data(), pre.size());
  hash_prefix(fd.fd, path, f.size, sha, blob);
  ManifestFile e;
  e.size = f.size;
  e.sha256 = sha.finish_hex();
  e.git_blob = f.git_blob;
  if (!f.sha256.empty()) {
    if (e.sha256 != f.sha256) return false;
    e.checked = "lfs-sha256";
  } else {
    if (blob.finish_hex() != f.git_blob) return false;
    e.checked = "git-blob";
  }
  s.record(f.name, e);
  return true;
}

void fetch_full(Setup& s, HttpClient& http, const HubFile& f) {
  const std::string part = s.part_path(f.name);
  make_dirs(parent_of(part));
  ::unlink(s.sparse_path(f.name).c_str());  // an abandoned stream-mode part of this file
  ::unlink(s.sparse_progress_path(f.name).c_str());
  // The part outlives a failed or interrupted download: the next run resumes it.
  AtomicFile file(s.dest_path(f.name), {.temp = part, .resume = true});
  uint64_t have = file.size();
  if (have > f.size) have = 0;
  if (have == 0) file.truncate(0);

  Hasher sha(HashKind::sha256), blob(HashKind::sha1);
  const std::string pre = git_blob_prefix(f.size);
  auto reset = [&] {
    sha.reset();
    blob.reset();
    blob.update(pre.data(), pre.size());
  };
  reset();
  if (have) hash_prefix(file.fd(), part, have, sha, blob);  // resume: re-hash what is there
  s.done_bytes += have;
  uint64_t written = have;

  http.download(
      s.url(f.name), have, f.size,
      [&](uint64_t pos, const uint8_t* data, size_t n) {
        file.write_at(data, n, pos);
        sha.update(data, n);
        blob.update(data, n);
        written = pos + n;
        s.done_bytes += n;
        s.fetched_bytes += n;
      },
      [&] {  // the server ignored Range: start over from byte 0
        file.truncate(0);
        reset();
        s.done_bytes -= written;
        written = 0;
      });

  const uint64_t size = file.size();
  std::string problem;
  ManifestFile e;
  e.size = f.size;
  e.sha256 = sha.finish_hex();
  e.git_blob = f.git_blob;
  e.checked = "none";
  if (size != f.size) {
    problem = "downloaded " + std::to_string(size) + " bytes, expected " + std::to_string(f.size);
  } else if (!f.sha256.empty()) {
    e.checked = "lfs-sha256";
    if (e.sha256 != f.sha256) problem = "sha256 mismatch: expected " + f.sha256 + ", got " + e.sha256;
  } else if (!f.git_blob.empty()) {
    e.checked = "git-blob";
    std::string got = blob.finish_hex();
    if (got != f.git_blob) problem = "git blob id mismatch: expected " + f.git_blob + ", got " + got;
  }
  if (!problem.empty()) {
    file.discard();
    s.done_bytes -= written;
    fail(f.name, problem + "; the download was deleted, not installed (run setup again)");
  }
  publish(file);
  s.record(f.name, e);
}

uint64_t le64(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | uint8_t(b[size_t(i)]);
  return v;
}

// Reads a shard's header with two Range requests and plans its spine runs.
void prepare_stream(Setup& s, HttpClient& http, Item& it) {
  const HubFile& f = *it.file;
  const std::string url = s.url(f.name);
  if (f.size < 8) fail(f.name, "is " + std::to_string(f.size) + " bytes: too small for a safetensors file");
  std::string head;
  auto append = [&](uint64_t, const uint8_t* d, size_t n) { head.append(reinterpret_cast<const char*>(d), n); };
  http.get_range(url, 0, 8, f.size, append);
  const uint64_t n = le64(head);
  if (n == 0 || n > kMaxSafetensorsHeader || 8 + n > f.size)
    fail(f.name, "safetensors header length " + std::to_string(n) + " is impossible for a " +
                     std::to_string(f.size) + "-byte file");
  http.get_range(url, 8, n, f.size, append);
  ShardHeader h = parse_safetensors_header(std::string_view(head).substr(8), f.size, f.name);
  it.header_bytes = std::move(head);
  it.runs = spine_runs(h);
  it.final_bytes = it.header_bytes.size();
  for (const ByteRun& r : it.runs) it.final_bytes += r.length;
  s.total_bytes += it.final_bytes;
}

void fetch_stream(Setup& s, HttpClient& http, Item& it) {
  const HubFile& f = *it.file;
  const std::string part = s.sparse_path(f.name), progress = s.sparse_progress_path(f.name);
  const std::string header_sha = sha256_hex(it.header_bytes.data(), it.header_bytes.size());
  make_dirs(parent_of(part));
  AtomicFile file(s.dest_path(f.name), {.temp = part, .resume = true});

  // Resume where a previous run stopped, if it was fetching this very header.
  size_t runs_done = 0;
  const uint64_t part_size = file.size();
  {
    std::ifstream in(progress);
    if (in && part_size == f.size) {
      std::stringstream ss;
      ss << in.rdbuf();
      runs_done = read_stream_progress(ss.str(), f.size, header_sha, it.runs.size());
    }
  }
  if (runs_done == 0) file.truncate(0);
  file.write_at(it.header_bytes.data(), it.header_bytes.size(), 0);
  file.truncate(f.size);  // sparse: the experts' bytes are never fetched

  Hasher h;
  h.update(it.header_bytes.data(), it.header_bytes.size());
  s.done_bytes += it.header_bytes.size();
  for (size_t r = 0; r < runs_done; r++) {
    hash_file_range(file.fd(), part, it.runs[r].offset, it.runs[r].length, h);
    s.done_bytes += it.runs[r].length;
  }
  const std::string url = s.url(f.name);
  for (size_t r = runs_done; r < it.runs.size(); r++) {
    http.get_range(url, it.runs[r].offset, it.runs[r].length, f.size, [&](uint64_t pos, const uint8_t* d, size_t n) {
      file.write_at(d, n, pos);
      h.update(d, n);
      s.done_bytes += n;
      s.fetched_bytes += n;
    });
    if (::fdatasync(file.fd()) != 0) fail(part, "fdatasync failed: " + errno_text(errno));
    write_file_atomic(progress, stream_progress_json(f.size, header_sha, r + 1));
  }
  ManifestFile e;
  e.size = f.size;
  e.sha256 = f.sha256;
  e.git_blob = f.git_blob;
  e.checked = "spine";
  e.spine_only = true;
  e.spine_sha256 = h.finish_hex();
  e.spine_bytes = it.final_bytes;
  publish(file);
  ::unlink(progress.c_str());
  s.record(f.name, e);
}

// Runs fn(i, client) for i in `order`, `jobs` at a time, each thread with its
// own HttpClient; calls tick() on this thread every 200 ms meanwhile. Returns
// the error messages (empty when all succeeded) and adds the response bytes.
std::vector<std::string> run_pool(const std::vector<size_t>& order, int jobs, const HttpOptions& http,
                                  const std::function<void(size_t, HttpClient&)>& fn,
                                  const std::function<void()>& tick, uint64_t* body_bytes) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> errors;
  if (order.empty()) return errors;
  std::atomic<size_t> next{0};
  int running = std::max(1, std::min<int>(jobs, int(order.size())));
  const int nthreads = running;
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; t++) {
    threads.emplace_back([&] {
      uint64_t bytes = 0;
      try {
        HttpClient client(http);
        for (size_t k; (k = next++) < order.size();) {
          try {
            fn(order[k], client);
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lock(mu);
            errors.push_back(e.what());
          }
        }
        bytes = client.counters().body_bytes;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back(e.what());
      }
      std::lock_guard<std::mutex> lock(mu);
      *body_bytes += bytes;
      running--;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      lock.unlock();
      tick();
      lock.lock();
    }
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

void fail_with(const std::string& dest, const std::vector<std::string>& errors) {
  std::string msg = errors.size() == 1 ? "setup failed: " : "setup failed for " + std::to_string(errors.size()) + " files: ";
  const size_t shown = std::min<size_t>(errors.size(), 3);
  for (size_t i = 0; i < shown; i++) msg += (i ? "; " : "") + errors[i];
  if (errors.size() > shown) msg += "; and " + std::to_string(errors.size() - shown) + " more";
  fail(dest, msg);
}

void remove_span_cache(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
  ::rmdir(dir.c_str());
}

std::string human(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1ull << 20));
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace

bool is_routed_expert_tensor(const std::string& name) {
  static const std::string key = ".block_sparse_moe.experts.";
  size_t at = name.find(key);
  if (at == std::string::npos) return false;
  size_t i = at + key.size(), digits = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') i++, digits++;
  return digits > 0 && i < name.size() && name[i] == '.';
}

std::vector<ByteRun> spine_runs(const ShardHeader& header) {
  std::vector<const TensorInfo*> ts;
  for (const TensorInfo& t : header.tensors)
    if (t.nbytes > 0) ts.push_back(&t);
  std::sort(ts.begin(), ts.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  std::vector<ByteRun> runs;
  bool open = false;
  for (const TensorInfo* t : ts) {
    if (is_routed_expert_tensor(t->name)) {
      open = false;
      continue;
    }
    if (open) {
      runs.back().length = t->offset + t->nbytes - runs.back().offset;
    } else {
      runs.push_back({t->offset, t->nbytes});
      open = true;
    }
  }
  return runs;
}

bool setup_selects(const SetupOptions& opt, const std::string& name) {
  auto any = [&](const std::vector<std::string>& globs) {
    for (const std::string& g : globs)
      if (::fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
    return false;
  };
  return (opt.include.empty() || any(opt.include)) && !any(opt.exclude);
}

namespace {

// Which files of the revision this setup installs (--include/--exclude, the
// mode), which are already in place (skipped), and the bytes each will hold.
void plan_items(Setup& s, const SetupOptions& opt, SetupResult& result) {
  for (const HubFile& f : s.rev.files) {
    if (!setup_selects(opt, f.name)) continue;
    Item it;
    it.file = &f;
    it.final_bytes = f.size;
    if (opt.mode == SetupMode::stream) {
      bool top_level = f.name.find('/') == std::string::npos;
      if (ends_with(f.name, ".safetensors")) {
        if (!top_level) continue;  // not part of the checkpoint
        it.stream = true;
      } else if (is_other_weight_file(f.name)) {
        continue;
      }
    }
    uint64_t size = 0;
    const bool present = stat_file(s.dest_path(f.name), &size) && size == f.size;
    auto e = s.manifest.files.find(f.name);
    if (present && e != s.manifest.files.end() && entry_matches(e->second, f)) {
      if (!e->second.spine_only) it.skip = true;                // whole file: good for both modes
      else if (it.stream) it.skip = true, it.final_bytes = e->second.spine_bytes;
    } else if (present && adopt_existing(s, f)) {
      it.skip = true;
    }
    if (it.stream && !it.skip) it.final_bytes = 0;  // known once the header is read
    s.total_bytes += it.final_bytes;
    if (it.skip) {
      s.done_bytes += it.final_bytes;
      s.files_done++;
      result.files_skipped++;
    }
    s.manifest.planned[f.name] = PlannedFile{f.size, f.sha256, f.git_blob, it.stream};
    s.items.push_back(std::move(it));
  }

}

// The files left to fetch, largest first, after checking the free space for
// them (what partial files already hold counts as fetched).
std::vector<size_t> plan_fetches(const Setup& s, const SetupOptions& opt) {
  uint64_t need = 0;
  std::vector<size_t> todo;
  for (size_t i = 0; i < s.items.size(); i++) {
    const Item& it = s.items[i];
    if (it.skip) continue;
    todo.push_back(i);
    uint64_t part = 0;
    if (!it.stream && stat_file(s.part_path(it.file->name), &part) && part <= it.file->size) need += it.file->size - part;
    else need += it.final_bytes;
  }
  if (opt.check_space && need > 0) {
    struct statvfs vfs;
    if (::statvfs(opt.dest.c_str(), &vfs) != 0) fail(opt.dest, "cannot read free space: " + errno_text(errno));
    const uint64_t avail = uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
    if (need > avail)
      fail(opt.dest, "not enough free space: this setup needs " + human(need) + " more, the file system has " +
                         human(avail) + " available (free some space, or pass --skip-space-check to try anyway)");
  }
  std::sort(todo.begin(), todo.end(),
            [&](size_t a, size_t b) { return s.items[a].final_bytes > s.items[b].final_bytes; });
  return todo;
}

// The end of an install: a stream install writes its stream manifest (and
// drops cached spans of shards that changed); a full one removes both.
void finish_install(const Setup& s, const SetupOptions& opt, const Checkpoint& ck, SetupResult& result) {
  if (opt.mode == SetupMode::stream) {
    StreamManifest sm;
    sm.hub = opt.source.hub;
    sm.repo = opt.source.repo;
    sm.revision = opt.source.revision;
    sm.commit = s.rev.commit;
    sm.max_cache_bytes = opt.max_cache_bytes;
    sm.connections = opt.connections;
    sm.stall_timeout_s = opt.http.stall_timeout_s;
    sm.retries = opt.http.retries;
    sm.backoff_ms = opt.http.backoff_ms;
    for (const std::string& path : ck.shard_paths) {
      const std::string name = path.substr(path.rfind('/') + 1);
      const HubFile* f = nullptr;
      for (const HubFile& g : s.rev.files)
        if (g.name == name) f = &g;
      if (!f) fail(path, "shard is not in the hub's file list");
      const ManifestFile& e = s.manifest.files.at(name);
      sm.shards.push_back({name, s.url(name), f->size, f->sha256, !e.spine_only});
      if (e.spine_only) result.remote_expert_bytes += f->size - e.spine_bytes;
    }
    // Cached spans belong to the shards they came from: drop them if any shard changed.
    if (stream_manifest_exists(opt.dest)) {
      StreamManifest prev = read_stream_manifest(opt.dest);
      bool same = prev.shards.size() == sm.shards.size();
      for (size_t i = 0; same && i < sm.shards.size(); i++)
        same = prev.shards[i].name == sm.shards[i].name && prev.shards[i].size == sm.shards[i].size &&
               prev.shards[i].sha256 == sm.shards[i].sha256 && !sm.shards[i].sha256.empty();
      if (!same) remove_span_cache(opt.dest + "/" + kSpanCacheDirName);
    }
    write_stream_manifest(opt.dest, sm);
    make_dirs(opt.dest + "/" + kSpanCacheDirName);
  } else {
    // Every shard is whole now: experts are read locally.
    if (stream_manifest_exists(opt.dest)) {
      const std::string path = opt.dest + "/" + kStreamManifestName;
      if (::unlink(path.c_str()) != 0) fail(path, "cannot remove: " + errno_text(errno));
      fsync_dir(opt.dest);
    }
    remove_span_cache(opt.dest + "/" + kSpanCacheDirName);
  }
}

}  // namespace

SetupResult run_setup(const SetupOptions& opt, const std::function<void(const SetupProgress&)>& on_progress) {
  check_repo_id(opt.source.repo);
  if (opt.dest.empty()) fail("--dest", "is empty");
  if (opt.jobs < 1 || opt.jobs > 64) fail("--jobs", "must be 1..64");
  const auto t0 = std::chrono::steady_clock::now();
  Setup s(opt);
  make_dirs(opt.dest);

  // The file list.
  HttpClient api(opt.http);
  const std::string api_url = hub_api_url(opt.source);
  s.rev = parse_hub_revision(api.get(api_url), api_url);
  s.pin = s.rev.commit.empty() ? opt.source.revision : s.rev.commit;

  read_setup_manifest(opt.dest, &s.manifest);
  s.manifest.hub = opt.source.hub;
  s.manifest.repo = opt.source.repo;
  s.manifest.revision = opt.source.revision;
  s.manifest.commit = s.rev.commit;
  s.manifest.mode = opt.mode == SetupMode::full ? "full" : "stream";
  s.manifest.planned.clear();

  SetupResult result;
  result.commit = s.rev.commit;
  plan_items(s, opt, result);
  auto tick = [&](bool final) {
    if (!on_progress) return;
    SetupProgress p;
    p.total_bytes = s.total_bytes;
    p.done_bytes = s.done_bytes;
    p.fetched_bytes = s.fetched_bytes;
    p.files_total = int(s.items.size());
    p.files_done = s.files_done;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    p.final = final;
    on_progress(p);
  };

  // Stream shards: headers first, to know the spine.
  std::vector<size_t> headers;
  for (size_t i = 0; i < s.items.size(); i++)
    if (s.items[i].stream && !s.items[i].skip) headers.push_back(i);
  uint64_t body_bytes = 0;
  std::vector<std::string> errors =
      run_pool(headers, opt.jobs, opt.http, [&](size_t i, HttpClient& c) { prepare_stream(s, c, s.items[i]); },
               [&] { tick(false); }, &body_bytes);
  if (!errors.empty()) fail_with(opt.dest, errors);

  const std::vector<size_t> todo = plan_fetches(s, opt);
  {
    std::lock_guard<std::mutex> lock(s.manifest_mu);
    write_setup_manifest(opt.dest, s.manifest);
  }

  errors = run_pool(
      todo, opt.jobs, opt.http,
      [&](size_t i, HttpClient& c) {
        Item& it = s.items[i];
        if (it.stream) fetch_stream(s, c, it);
        else fetch_full(s, c, *it.file);
        s.files_done++;
      },
      [&] { tick(false); }, &body_bytes);
  result.files_fetched = int(todo.size() - errors.size());
  result.bytes_fetched = body_bytes + api.counters().body_bytes;
  tick(true);
  ::rmdir((opt.dest + "/" + kPartialDirName).c_str());  // only if empty
  if (!errors.empty()) fail_with(opt.dest, errors);

  // Finish: the model directory must open, and say where experts come from.
  Checkpoint ck;
  try {
    ck = open_checkpoint(opt.dest, {.allow_unknown = opt.allow_unknown});
  } catch (const Error& e) {
    // A full install of selected files (--include/--exclude) need not be a whole checkpoint.
    const bool selected = !opt.include.empty() || !opt.exclude.empty();
    if (selected && opt.mode == SetupMode::full) return result;
    fail(opt.dest, std::string("the files are installed, but they are not a checkpoint sluice can open: ") + e.what());
  }
  finish_install(s, opt, ck, result);
  return result;
}

}  // namespace sluice
