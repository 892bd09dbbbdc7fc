#include "hub/verify_install.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_io.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/shard_stamp.h"
#include "hub/http_setup.h"
#include "hub/setup_manifest.h"
#include "hub/sha256.h"
#include "hub/span_cache.h"
#include "io/stripe.h"

namespace sluice {

namespace {

bool file_size(const std::string& path, uint64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *size = uint64_t(st.st_size);
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every regular file under `dir`, as paths relative to it.
void list_files(const std::string& dir, const std::string& rel, std::vector<std::string>* out) {
  DIR* d = ::opendir((dir + (rel.empty() ? "" : "/" + rel)).c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string r = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::lstat((dir + "/" + r).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) list_files(dir, r, out);
    else if (S_ISREG(st.st_mode)) out->push_back(r);
  }
  ::closedir(d);
}

// sha256 of a stream-mode shard's local bytes: the header, then the spine runs in order.
std::string spine_sha256(const std::string& path) {
  ShardHeader h = read_safetensors_header(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  Hasher hs;
  try {
    hash_file_range(fd, path, 0, h.data_start, hs);
    for (const ByteRun& r : spine_runs(h)) hash_file_range(fd, path, r.offset, r.length, hs);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return hs.finish_hex();
}

// A checkpoint whose experts were moved to the drives of its stripe: each
// shard's sha256 as installed (moved_shard_sha256).
struct MovedShards {
  Checkpoint ck;  // read through the stripe
  std::vector<std::vector<std::pair<uint64_t, FileSpan>>> spans;  // moved_expert_spans
  bool unreadable = false;  // the stripe did not open: the shards' hashes cannot be checked

  // "" when `name` is not one of them.
  std::string sha256(const std::string& name) const {
    for (size_t shard = 0; shard < spans.size(); shard++)
      if (!spans[shard].empty() && base_name(ck.shard_paths[shard]) == name) return moved_shard_sha256(ck, spans[shard], shard);
    return "";
  }
};

struct Verifier {
  std::string dir;
  bool repair;
  const std::function<void(const VerifyLine&)>& report;
  VerifyResult result;

  void ok(const std::string& t) { report({VerifyLevel::ok, t}); }
  void note(const std::string& t) { report({VerifyLevel::note, t}); }
  // A problem; `fix` (if given and repairing) repairs it and says how.
  void problem(const std::string& t, const std::function<std::string()>& fix = nullptr) {
    if (repair && fix) {
      std::string how = fix();
      if (!how.empty()) {
        result.repaired++;
        report({VerifyLevel::problem, t + " [repaired: " + how + "]"});
        return;
      }
    }
    result.problems++;
    report({VerifyLevel::problem, t});
  }
};

void check_files(Verifier& v, SetupManifest& m, bool* manifest_changed, const MovedShards* moved) {
  std::map<std::string, PlannedFile> planned = m.planned;
  if (planned.empty())  // a manifest from before plans were recorded: check what it lists
    for (const auto& [name, f] : m.files) planned[name] = PlannedFile{f.size, f.sha256, f.git_blob, f.spine_only};
  for (const auto& [name, p] : planned) {
    const std::string path = v.dir + "/" + name;
    auto e = m.files.find(name);
    uint64_t size = 0;
    auto forget = [&]() -> std::string {
      if (e == m.files.end()) return "";
      m.files.erase(e);
      *manifest_changed = true;
      return "dropped from the setup manifest; run sluice setup again to download it";
    };
    if (!file_size(path, &size)) {
      v.problem(name + ": missing (run sluice setup again)");
      continue;
    }
    if (e == m.files.end()) {
      v.problem(name + ": not recorded as complete (setup did not finish; run it again)");
      continue;
    }
    const ManifestFile& f = e->second;
    if (size != f.size || size != p.size) {
      v.problem(name + ": size " + std::to_string(size) + ", expected " + std::to_string(p.size), forget);
      continue;
    }
    if (moved && moved->unreadable && ends_with(name, ".safetensors")) {
      v.note(name + ": not hashed: its experts were moved to a stripe that does not open (above)");
      continue;  // its holes would fail, and a repair would download it over the moved shard
    }
    try {
      if (f.spine_only) {
        std::string got = spine_sha256(path);
        if (got != f.spine_sha256)
          v.problem(name + ": header+spine sha256 " + got + " does not match " + f.spine_sha256 + " recorded at setup",
                    forget);
        else v.ok(name + ": header and spine (" + std::to_string(f.spine_bytes) + " bytes) match their sha256");
        continue;
      }
      std::string got = moved ? moved->sha256(name) : "";
      const bool through_stripe = !got.empty();
      if (!through_stripe) got = sha256_file(path);
      if (got != f.sha256) {
        v.problem(name + ": sha256 " + got + " does not match " + f.sha256 + " recorded at setup", forget);
      } else if (!p.sha256.empty() && got != p.sha256) {
        v.problem(name + ": sha256 " + got + " does not match the hub's " + p.sha256, forget);
      } else {
        v.ok(name + ": " + std::to_string(size) + " bytes, sha256 ok" +
             (through_stripe ? " (its experts read from the stripe's drives: moved there)" : "") +
             (f.checked == "lfs-sha256" ? " (the hub's LFS oid)"
              : f.checked == "git-blob" ? " (checked against the git blob id at download)"
                                        : " (nothing to compare with at download)"));
      }
    } catch (const Error& err) {
      v.problem(err.what(), forget);
    }
  }
}

void check_partials(Verifier& v, const SetupManifest& m) {
  const std::string pdir = v.dir + "/" + kPartialDirName;
  std::vector<std::string> files;
  list_files(pdir, "", &files);
  for (const std::string& rel : files) {
    const std::string path = pdir + "/" + rel;
    auto remove = [&]() -> std::string {
      if (::unlink(path.c_str()) != 0) return "";
      if (ends_with(path, ".sparse")) ::unlink((path + ".json").c_str());
      return "deleted";
    };
    uint64_t size = 0;
    file_size(path, &size);
    std::string name;
    bool sparse = false;
    if (ends_with(rel, ".part")) name = rel.substr(0, rel.size() - 5);
    else if (ends_with(rel, ".sparse")) name = rel.substr(0, rel.size() - 7), sparse = true;
    else if (ends_with(rel, ".sparse.json")) continue;  // checked with its .sparse file
    else {
      v.problem(".partial/" + rel + ": not a partial download", remove);
      continue;
    }
    auto p = m.planned.find(name);
    auto done = m.files.find(name);
    uint64_t have = 0;
    if (p == m.planned.end()) {
      v.problem(".partial/" + rel + ": stale partial download (not in the planned file list)", remove);
    } else if (done != m.files.end() && file_size(v.dir + "/" + name, &have) && have == done->second.size) {
      v.problem(".partial/" + rel + ": stale partial download (the file is installed)", remove);
    } else if (!sparse && size > p->second.size) {
      v.problem(".partial/" + rel + ": " + std::to_string(size) + " bytes, more than the file's " +
                    std::to_string(p->second.size),
                remove);
    } else if (sparse && size != p->second.size) {
      v.problem(".partial/" + rel + ": sparse shard of " + std::to_string(size) + " bytes, expected " +
                    std::to_string(p->second.size),
                remove);
    } else {
      v.note(".partial/" + rel + ": " + (sparse ? "interrupted spine download" : "partial download, " +
                                                                                  std::to_string(size) + " of " +
                                                                                  std::to_string(p->second.size) +
                                                                                  " bytes") +
             " (setup resumes it and checks the result)");
    }
  }
}

}  // namespace

std::string moved_shard_sha256(const Checkpoint& ck, const std::vector<std::pair<uint64_t, FileSpan>>& moved, size_t shard) {
  std::map<int, Fd> fds;  // file of ck -> its descriptor, opened on first use
  const auto fd_of = [&](int file) {
    if (auto it = fds.find(file); it != fds.end()) return it->second.fd;
    const std::string& path = ck.shard_paths[size_t(file)];
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    return fds.try_emplace(file, fd).first->second.fd;
  };
  Hasher hs;
  uint64_t at = 0;
  for (const auto& [offset, drive] : moved) {
    hash_file_range(fd_of(int(shard)), ck.shard_paths[shard], at, offset - at, hs);
    hash_file_range(fd_of(drive.file), ck.shard_paths[size_t(drive.file)], drive.offset, drive.length, hs);
    at = offset + drive.length;
  }
  hash_file_range(fd_of(int(shard)), ck.shard_paths[shard], at, ck.shard_sizes[shard] - at, hs);
  return hs.finish_hex();
}

VerifyResult verify_model(const std::string& dir, bool repair, const std::function<void(const VerifyLine&)>& report) {
  Verifier v{dir, repair, report, {}};
  SetupManifest m;
  bool have_manifest = false;
  try {
    have_manifest = read_setup_manifest(dir, &m);
  } catch (const Error& e) {
    v.problem(e.what());
  }
  if (have_manifest) {
    bool changed = false;
    std::unique_ptr<MovedShards> moved;
    if (stripe_moved(dir)) {
      try {
        moved = std::make_unique<MovedShards>();
        moved->ck = open_checkpoint(dir);
        const StripeUse u = apply_stripe(moved->ck, /*spine=*/false);
        moved->spans = moved_expert_spans(moved->ck, u);
      } catch (const Error& e) {
        v.problem(std::string("the shards' experts were moved to a stripe, which cannot be read: ") + e.what());
        moved->unreadable = true;
      }
    }
    check_files(v, m, &changed, moved.get());
    if (changed) write_setup_manifest(dir, m);
    check_partials(v, m);
  } else {
    v.note(std::string("no ") + kSetupManifestName + ": not installed by sluice setup, file hashes cannot be checked");
  }

  // The contract and the span index.
  std::unique_ptr<Checkpoint> ck;
  try {
    ck = std::make_unique<Checkpoint>(open_checkpoint(dir));
    size_t spans = 0;
    for (const auto& l : ck->experts) spans += l.size();
    v.ok("config and span index: " + std::to_string(ck->shard_paths.size()) + " shards, " +
         std::to_string(ck->tensors.size()) + " tensors, " + std::to_string(spans) + " expert spans");
  } catch (const Error& e) {
    v.problem(std::string("config/span index: ") + e.what());
  }

  if (stream_manifest_exists(dir)) {
    try {
      StreamManifest sm = read_stream_manifest(dir);
      if (ck) {
        for (size_t s = 0; s < ck->shard_paths.size(); s++) {
          const std::string name = ck->shard_paths[s].substr(ck->shard_paths[s].rfind('/') + 1);
          const StreamShard* found = find_stream_shard(sm, name);
          if (!found) v.problem(std::string(kStreamManifestName) + ": no URL for shard " + name);
          else if (found->size != ck->shard_sizes[s])
            v.problem(name + ": " + std::to_string(ck->shard_sizes[s]) + " bytes, the stream manifest says " +
                      std::to_string(found->size));
        }
      }
      v.ok(std::string("stream mode: experts are fetched from ") + sm.hub + " (" + sm.repo + ")" +
           (sm.max_cache_bytes ? ", cache bound " + std::to_string(sm.max_cache_bytes) + " bytes" : ""));
    } catch (const Error& e) {
      v.problem(e.what());
    }
  }

  const std::string cache_dir = dir + "/" + kSpanCacheDirName;
  struct stat st;
  if (::stat(cache_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    auto expected = [&](int layer, int expert) -> int64_t {
      if (!ck || layer < 0 || size_t(layer) >= ck->experts.size() || expert < 0 ||
          size_t(expert) >= ck->experts[size_t(layer)].size())
        return -1;
      return int64_t(ck->experts[size_t(layer)][size_t(expert)].length);
    };
    if (!ck) {
      v.note("span cache not checked: the checkpoint does not open");
    } else {
      uint64_t good = 0, bytes = 0;
      for (const CacheEntryCheck& c : check_span_cache(cache_dir, expected, false)) {
        if (c.problem.empty()) {
          good++;
          bytes += c.bytes;
          continue;
        }
        v.problem(kSpanCacheDirName + std::string("/") + c.path.substr(c.path.rfind('/') + 1) + ": " + c.problem,
                  [&]() -> std::string {
                    if (c.problem.find("left alone") != std::string::npos) return "";
                    return ::unlink(c.path.c_str()) == 0 ? "deleted; fetched again on next use" : "";
                  });
      }
      v.ok("span cache: " + std::to_string(good) + " entries, " + std::to_string(bytes) + " bytes, checksums ok");
    }
  }
  return v.result;
}

}  // namespace sluice
