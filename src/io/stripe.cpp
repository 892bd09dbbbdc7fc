#include "io/stripe.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <algorithm>
#include <tuple>
#include <sstream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/run_jobs.h"
#include "checkpoint/shard_stamp.h"
#include "io/aligned_buffer.h"

namespace sluice {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr char kTrailerMagic[8] = {'S', 'L', 'S', 'T', 'R', 'I', 'P', '1'};
constexpr uint64_t kTrailer = 16;
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;

// FNV-1a over 64-bit words (then the tail bytes): a checksum, fast enough to
// run over every byte written.
uint64_t fnv1a64(uint64_t h, const uint8_t* p, uint64_t n) {
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kFnvPrime;
  }
  for (; i < n; i++) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

std::string hex16(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", (unsigned long long)v);
  return s;
}

std::string model_name(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return base_name(d);
}

std::string stripe_folder(const std::string& drive, const std::string& dir) {
  return drive + "/sluice-stripe-" + model_name(dir);
}

bool file_has_size(const std::string& path, uint64_t bytes) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_size) == bytes;
}

// The trailer's hash, or throws naming the file.
uint64_t trailer_hash(const std::string& path, uint64_t bytes) {
  uint8_t t[kTrailer];
  read_exact(path, t, kTrailer, bytes - kTrailer);
  if (std::memcmp(t + 8, kTrailerMagic, 8) != 0) fail(path, "not a stripe file (no trailer)");
  uint64_t h;
  std::memcpy(&h, t, 8);
  return h;
}

// What a drive file holds: bytes of the shards, where each goes in the file,
// and what to call it in a message.
struct Part {
  FileSpan src;
  uint64_t at = 0;
};

std::vector<Part> file_parts(const Checkpoint& ck, const Stripe& s, const StripeFile& f) {
  std::vector<Part> parts;
  if (f.layer >= 0)
    for (size_t i = 0; i < f.experts.size(); i++) parts.push_back({ck.experts[size_t(f.layer)][size_t(f.experts[i])], s.stride * i});
  else
    for (size_t i = 0; i < f.tensors.size(); i++) parts.push_back({ck.tensor(f.tensors[i]).span(), f.offsets[i]});
  return parts;
}

std::string part_name(const StripeFile& f, size_t i) {
  if (f.layer >= 0) return "expert " + std::to_string(f.experts[i]) + " of layer " + std::to_string(f.layer);
  return "tensor " + f.tensors[i];
}

// Parts are copied in blocks of this size (a multiple of 8: the checksum
// runs over 64-bit words, so blocking does not change it).
constexpr uint64_t kCopyBlock = 16ull << 20;

// f(i, part, off, n) for each block of each part, in order.
template <class F>
void for_each_block(const std::vector<Part>& parts, F&& f) {
  for (size_t i = 0; i < parts.size(); i++)
    for (uint64_t off = 0; off < parts[i].src.length; off += kCopyBlock)
      f(i, parts[i], off, std::min(kCopyBlock, parts[i].src.length - off));
}

void write_file(const Checkpoint& ck, const Stripe& s, StripeFile& f, const ShardReader& read,
                const std::function<void(uint64_t)>& done) {
  AtomicFile w(f.path, {.temp = f.path + ".tmp." + std::to_string(::getpid())});
  w.reserve(f.bytes);
  AlignedBuffer buf(kCopyBlock);
  const std::vector<uint8_t> zeros(kIoAlign, 0);
  const auto pad_to = [&](uint64_t at) {
    while (w.at() < at) w.write(zeros.data(), size_t(std::min<uint64_t>(zeros.size(), at - w.at())));
  };
  uint64_t h = kFnvBasis;
  for_each_block(file_parts(ck, s, f), [&](size_t, const Part& p, uint64_t off, uint64_t n) {
    if (off == 0) pad_to(p.at);
    read(p.src.file, p.src.offset + off, buf.data(), n);
    h = fnv1a64(h, buf.data(), n);
    w.write(buf.data(), n);
    done(n);
  });
  pad_to(f.bytes - kTrailer);
  uint8_t t[kTrailer];
  std::memcpy(t, &h, 8);
  std::memcpy(t + 8, kTrailerMagic, 8);
  w.write(t, kTrailer);
  w.commit(int64_t(f.bytes));
  f.hash = h;
}

json manifest_json(const Stripe& s, const json& shards) {
  json j = {{"format", "sluice-stripe"}, {"version", 1}, {"shards", shards}, {"span_bytes", s.span_bytes},
            {"stride", s.stride}, {"copies", s.copies}, {"drives", json::array()}, {"files", json::array()}};
  for (const StripeDrive& d : s.drives) j["drives"].push_back({{"path", d.path}, {"weight", d.weight}});
  for (const StripeFile& f : s.files)
    j["files"].push_back({{"drive", f.drive}, {"layer", f.layer}, {"experts", f.experts}, {"path", f.path},
                          {"bytes", f.bytes}, {"fnv1a64", hex16(f.hash)}});
  if (s.moved) j["moved"] = true;
  if (s.punching >= 0) j["punching"] = s.punching;
  if (!s.spine_files.empty()) {
    j["spine_files"] = json::array();
    for (const StripeFile& f : s.spine_files)
      j["spine_files"].push_back({{"drive", f.drive}, {"shard", f.shard}, {"tensors", f.tensors}, {"offsets", f.offsets},
                                  {"path", f.path}, {"bytes", f.bytes}, {"fnv1a64", hex16(f.hash)}});
  }
  return j;
}

json read_manifest(const std::string& dir) {
  const std::string path = stripe_manifest_path(dir);
  std::ifstream in(path);
  if (!in) fail(path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    json j = json::parse(ss.str());
    if (j.at("format") != "sluice-stripe") fail(path, "not a stripe manifest");
    if (j.at("version") != 1) fail(path, "unsupported stripe version " + j.at("version").dump());
    return j;
  } catch (const json::exception& e) {
    fail(path, std::string("stripe manifest is malformed: ") + e.what());
  }
}

// A stripe's drive file (its name ends in .spans), not a shard.
bool is_drive_file(const std::string& path) {
  return path.size() > 6 && path.compare(path.size() - 6, 6, ".spans") == 0;
}

// Drive files of an earlier stripe that the new one does not name.
void remove_unnamed(const Stripe& now, const std::vector<std::string>& folders) {
  std::set<std::string> keep;
  for (const StripeFile& f : now.files) keep.insert(f.path);
  for (const StripeFile& f : now.spine_files) keep.insert(f.path);
  for (const std::string& folder : folders) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      const std::string p = entry.path().string();
      if (is_drive_file(p) && !keep.count(p)) fs::remove(p, ec);
    }
  }
}

}  // namespace

std::string stripe_manifest_path(const std::string& dir) { return dir + "/stripe.json"; }

std::vector<StripeDrive> parse_drives(const std::string& list) {
  std::vector<StripeDrive> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    StripeDrive d;
    const size_t colon = item.rfind(':');
    d.path = item.substr(0, colon);
    d.weight = 0;
    if (colon != std::string::npos) {
      try {
        size_t used = 0;
        d.weight = std::stod(item.substr(colon + 1), &used);
        if (used != item.size() - colon - 1 || !(d.weight > 0)) throw std::invalid_argument("");
      } catch (const std::exception&) {
        fail("--drives", "'" + item + "': the weight after ':' must be a positive number");
      }
    }
    while (d.path.size() > 1 && d.path.back() == '/') d.path.pop_back();
    if (d.path.empty()) fail("--drives", "an empty drive path in '" + list + "'");
    out.push_back(d);
  }
  if (out.empty()) fail("--drives", "name at least one drive folder");
  return out;
}

std::vector<int> place_experts(int experts, const std::vector<double>& weights) {
  std::vector<int> where(static_cast<size_t>(experts), 0), count(weights.size(), 0);
  for (int e = 0; e < experts; e++) {
    size_t best = 0;  // the next expert goes where it leaves the least load per weight
    for (size_t d = 1; d < weights.size(); d++)
      if (double(count[d] + 1) / weights[d] < double(count[best] + 1) / weights[best]) best = d;
    where[size_t(e)] = int(best);
    count[best]++;
  }
  return where;
}

StripedRate striped_rate(const std::string& list, int experts) {
  std::vector<double> rates;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    double r = 0;
    try {
      size_t used = 0;
      r = std::stod(item, &used);
      if (used != item.size()) r = 0;
    } catch (const std::exception&) {
    }
    if (!(r > 0)) fail("--disk-gbps", "'" + item + "' is not a positive rate in GB/s");
    rates.push_back(r);
  }
  if (rates.empty()) fail("--disk-gbps", "give one rate per drive, e.g. 7 or 7,7,3.5");
  double sum = 0;
  for (double x : rates) sum += x;
  if (rates.size() == 1 || experts < 1) return {rates[0], rates.size(), rates[0], sum, {}};
  const std::vector<int> where = place_experts(experts, rates);
  std::vector<int> count(rates.size(), 0);
  for (int d : where) count[size_t(d)]++;
  double slowest = 0;  // a layer's experts arrive when the busiest drive has read its share
  for (size_t d = 0; d < rates.size(); d++) slowest = std::max(slowest, double(count[d]) / rates[d]);
  StripedRate r{double(experts) / slowest, rates.size(), rates[0], sum, {}};
  for (size_t d = 0; d < rates.size(); d++) r.placement += (d ? "/" : "") + std::to_string(count[d]);
  return r;
}

namespace {
// The spine's tensors (every one outside the routed experts' spans) in the
// shards' order, each to the drive with the least bytes per weight so far;
// one file per drive and shard.
void plan_spine(const Checkpoint& ck, const std::string& stamps, Stripe& s) {
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> experts(ck.shard_paths.size());  // [shard] (start, end)
  for (const auto& layer : ck.experts)
    for (const FileSpan& e : layer) experts[size_t(e.file)].push_back({e.offset, e.offset + e.length});
  for (auto& v : experts) std::sort(v.begin(), v.end());
  const auto in_an_expert = [&](const TensorInfo& t) {
    const auto& v = experts[size_t(t.shard)];
    auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(t.offset, UINT64_MAX));
    return it != v.begin() && std::prev(it)->first <= t.offset && t.offset + t.nbytes <= std::prev(it)->second;
  };
  std::vector<std::pair<const std::string*, const TensorInfo*>> spine;
  for (const auto& [name, t] : ck.tensors)
    if (t.nbytes > 0 && !in_an_expert(t)) spine.push_back({&name, &t});
  std::sort(spine.begin(), spine.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->shard, a.second->offset) < std::tie(b.second->shard, b.second->offset);
  });
  std::vector<double> load(s.drives.size(), 0);
  std::map<std::pair<int, int>, StripeFile> files;  // (shard, drive)
  std::map<std::pair<int, int>, uint64_t> end;
  for (const auto& [name, t] : spine) {
    size_t best = 0;
    for (size_t d = 1; d < s.drives.size(); d++)
      if ((load[d] + double(t->nbytes)) / s.drives[d].weight < (load[best] + double(t->nbytes)) / s.drives[best].weight) best = d;
    load[best] += double(t->nbytes);
    StripeFile& f = files[{t->shard, int(best)}];
    uint64_t& at = end[{t->shard, int(best)}];
    f.drive = int(best), f.layer = -1, f.shard = t->shard;
    f.tensors.push_back(*name);
    f.offsets.push_back(at);
    at = align_up(at + t->nbytes, kIoAlign);
  }
  for (auto& [key, f] : files) {
    f.bytes = end[key] + kTrailer;
    std::string k = stamps + "/spine/" + std::to_string(f.shard);
    for (const std::string& n : f.tensors) k += "," + n;
    const uint64_t h = fnv1a64(kFnvBasis, reinterpret_cast<const uint8_t*>(k.data()), k.size());
    f.path = stripe_folder(s.drives[size_t(f.drive)].path, ck.dir) + "/S" + std::to_string(f.shard) + "." + hex16(h) + ".spans";
    s.spine_files.push_back(std::move(f));
  }
}
}  // namespace

Stripe plan_stripe(const Checkpoint& ck, const std::vector<StripeDrive>& drives, int copies, bool spine) {
  if (copies < 1 || copies > int(drives.size()))
    fail("--copies", "must be between 1 and the number of drives (" + std::to_string(drives.size()) + "), got " +
                         std::to_string(copies));
  Stripe s;
  s.dir = ck.dir;
  s.drives = drives;
  s.copies = copies;
  s.span_bytes = ck.config.expert_span_bytes();
  s.stride = align_up(s.span_bytes, kIoAlign);
  for (const StripeDrive& d : drives)
    if (!(d.weight > 0)) fail(d.path, "drive weight must be positive");
  const std::string stamps = shard_stamps_json(ck).dump();
  for (size_t l = 0; l < ck.experts.size(); l++) {
    if (ck.experts[l].empty()) continue;
    // Each layer on its own, so every layer's experts split in proportion.
    std::vector<double> weights;
    for (const StripeDrive& d : drives) weights.push_back(d.weight);
    const std::vector<int> where = place_experts(int(ck.experts[l].size()), weights);
    std::vector<std::vector<int>> on(drives.size());  // each drive's experts, ascending
    for (int e = 0; e < int(where.size()); e++)
      for (int c = 0; c < copies; c++) on[(size_t(where[size_t(e)]) + size_t(c)) % drives.size()].push_back(e);
    for (auto& list : on) std::sort(list.begin(), list.end());
    for (size_t d = 0; d < drives.size(); d++) {
      if (on[d].empty()) continue;
      StripeFile f;
      f.drive = int(d);
      f.layer = int(l);
      f.experts = on[d];
      std::string key = stamps + "/" + std::to_string(s.span_bytes) + "/" + std::to_string(l);
      for (int e : on[d]) key += "," + std::to_string(e);
      const uint64_t k = fnv1a64(kFnvBasis, reinterpret_cast<const uint8_t*>(key.data()), key.size());
      f.path = stripe_folder(drives[d].path, ck.dir) + "/L" + std::to_string(l) + "." + hex16(k) + ".spans";
      f.bytes = s.stride * on[d].size() + kTrailer;
      s.files.push_back(std::move(f));
    }
  }
  if (spine) plan_spine(ck, stamps, s);
  return s;
}

namespace {
// Throws naming the file unless it is whole and holds the shards' bytes
// (a moved stripe's expert file: unless its bytes match its checksum, the
// shards holding holes there).
void check_file(const Checkpoint& ck, const Stripe& s, const StripeFile& f) {
  if (!file_has_size(f.path, f.bytes)) fail(f.path, "missing or of the wrong size (drive " + s.drives[size_t(f.drive)].path + ")");
  if (trailer_hash(f.path, f.bytes) != f.hash) fail(f.path, "trailer checksum differs from the manifest's");
  const bool against_shards = !(s.moved && f.layer >= 0);
  AlignedBuffer mine(kCopyBlock), theirs(kCopyBlock);
  uint64_t h = kFnvBasis;
  for_each_block(file_parts(ck, s, f), [&](size_t i, const Part& p, uint64_t off, uint64_t n) {
    read_exact(f.path, mine.data(), n, p.at + off);
    h = fnv1a64(h, mine.data(), n);
    if (!against_shards) return;
    read_exact(ck.shard_paths[size_t(p.src.file)], theirs.data(), n, p.src.offset + off);
    if (std::memcmp(mine.data(), theirs.data(), n) != 0)
      fail(f.path, part_name(f, i) + " differs from the shards (drive " + s.drives[size_t(f.drive)].path + ")");
  });
  if (h != f.hash) fail(f.path, "bytes fail their checksum" + std::string(against_shards ? "" : " (the experts were moved off the shards: this drive holds the only copy)"));
}

// --move. Each shard's expert spans (every routed expert is striped), by
// offset: what becomes holes. ck as open_checkpoint gives it.
std::vector<std::vector<FileSpan>> expert_spans_by_shard(const Checkpoint& ck) {
  std::vector<std::vector<FileSpan>> out(ck.shard_paths.size());
  for (const auto& layer : ck.experts)
    for (const FileSpan& e : layer)
      if (e.length) out[size_t(e.file)].push_back(e);
  for (auto& v : out) std::sort(v.begin(), v.end(), [](const FileSpan& a, const FileSpan& b) { return a.offset < b.offset; });
  return out;
}

// A shard opened for punching, locked against every other process that has
// it open (span_reader.cpp takes a shared lock on what it reads): a server
// reading the experts from the shards must not see them turn to zeros.
void open_for_punching(const std::string& path, Fd& f) {
  f.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (f.fd < 0) fail(path, std::string("cannot open for writing (to free the experts' bytes): ") + std::strerror(errno));
  if (::flock(f.fd, LOCK_EX | LOCK_NB) != 0)
    fail(path, "is open in another sluice process (a server?): stop it, then run `sluice stripe ... --move` again");
}

uint64_t allocated_bytes(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 ? uint64_t(st.st_blocks) * 512 : 0;
}

// Whether the file system of `folder` frees a punched range (tried on a
// scratch file there): without it --move would only write zeros.
bool can_punch_holes(const std::string& folder) {
  const std::string path = folder + "/.sluice-punch-test." + std::to_string(::getpid());
  Fd f;
  f.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f.fd < 0) return false;
  const std::vector<uint8_t> block(1 << 16, 1);
  const bool ok = ::pwrite(f.fd, block.data(), block.size(), 0) == ssize_t(block.size()) &&
                  ::fallocate(f.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(block.size())) == 0;
  ::unlink(path.c_str());
  return ok;
}

// Frees the expert spans of shards [from, end): before each shard the
// manifest names it ("punching"), after its holes the shard's modification
// time goes back to its stamp (so stripe, packs and setup still take it for
// itself); the manifest is written without "punching" at the end. Returns
// the bytes the file system freed.
uint64_t punch_shards(const Checkpoint& ck, Stripe& s, const json& stamps, int from) {
  const std::vector<std::vector<FileSpan>> spans = expert_spans_by_shard(ck);
  uint64_t freed = 0;
  for (size_t i = size_t(from); i < ck.shard_paths.size(); i++) {
    if (spans[i].empty()) continue;
    const std::string& path = ck.shard_paths[i];
    s.punching = int(i);
    write_file_atomic(stripe_manifest_path(ck.dir), manifest_json(s, stamps).dump(1) + "\n");
    Fd f;
    open_for_punching(path, f);
    const uint64_t before = allocated_bytes(f.fd);
    for (const FileSpan& e : spans[i])
      if (::fallocate(f.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(e.offset), off_t(e.length)) != 0)
        fail(path, std::string("cannot free the experts' bytes (fallocate PUNCH_HOLE): ") + std::strerror(errno));
    const int64_t ns = stamps.at(i).at("mtime_ns").get<int64_t>();
    const timespec times[2] = {{0, UTIME_OMIT}, {time_t(ns / 1000000000), long(ns % 1000000000)}};
    if (::futimens(f.fd, times) != 0 || ::fsync(f.fd) != 0)
      fail(path, std::string("cannot set its time back after freeing the experts' bytes: ") + std::strerror(errno));
    const uint64_t after = allocated_bytes(f.fd);
    freed += before > after ? before - after : 0;
  }
  s.punching = -1;
  write_file_atomic(stripe_manifest_path(ck.dir), manifest_json(s, stamps).dump(1) + "\n");
  return freed;
}

// --move over a stripe just written: every expert file is checked against
// the shards first (they are about to be the only copy), then "moved" is
// written, then the holes.
uint64_t move_experts(const Checkpoint& ck, Stripe& s) {
  for (const StripeFile& f : s.files) check_file(ck, s, f);
  std::set<std::string> folders;
  for (size_t i = 0; i < ck.shard_paths.size(); i++) {
    Fd f;
    open_for_punching(ck.shard_paths[i], f);  // none in use, before anything changes
    folders.insert(parent_dir(ck.shard_paths[i]));
  }
  for (const std::string& folder : folders)
    if (!can_punch_holes(folder))
      fail(folder, "--move: this file system cannot free part of a file (fallocate PUNCH_HOLE); the stripe is written, "
                   "the shards are left whole");
  s.moved = true;
  return punch_shards(ck, s, shard_stamps_json(ck), 0);
}

// A --move killed while punching shard s.punching: its time moved (the
// holes), every other shard must still be as stamped; punch on from there.
uint64_t finish_move(const Checkpoint& ck, Stripe& s, const json& stamps) {
  for (size_t i = 0; i < ck.shard_paths.size(); i++) {
    if (int(i) == s.punching) continue;
    if (!stamps.is_array() || stamps.size() != ck.shard_paths.size() ||
        shard_stamp(ck.shard_paths[i]) != ShardStamp{stamps[i].value("bytes", uint64_t(0)), stamps[i].value("mtime_ns", int64_t(0))})
      fail(stripe_manifest_path(ck.dir), "a `stripe --move` was interrupted, and " + base_name(ck.shard_paths[i]) +
                                             " changed since: the experts are on the drives only; cannot finish");
  }
  return punch_shards(ck, s, stamps, s.punching);
}
}  // namespace

StripeResult write_stripe(const Checkpoint& ck, const std::vector<StripeDrive>& drives, int copies,
                          const std::function<void(uint64_t, uint64_t)>& progress, bool spine, bool move,
                          const StripeSource* source) {
  for (const std::string& p : ck.shard_paths)
    if (is_drive_file(p))
      fail(p, "write_stripe takes the checkpoint as opened, not read through a stripe");
  Stripe s = plan_stripe(ck, drives, copies, spine);
  StripeResult r;
  r.drive_bytes.assign(drives.size(), 0);
  std::vector<std::string> old_folders;
  std::set<std::string> old_paths;
  int old_copies = 1;
  bool old_moved = false;
  json old_shards;  // the stamps the earlier stripe was made with
  if (fs::exists(stripe_manifest_path(ck.dir))) {
    try {
      const json old = read_manifest(ck.dir);
      for (const json& f : old.at("files")) old_paths.insert(f.at("path").get<std::string>());
      for (const json& f : old.value("spine_files", json::array())) old_paths.insert(f.at("path").get<std::string>());
      old_copies = old.value("copies", 1);
      old_moved = old.value("moved", false);
      old_shards = old.value("shards", json());
      for (const json& d : old.at("drives"))
        old_folders.push_back(stripe_folder(d.at("path").get<std::string>(), ck.dir));
    } catch (const std::exception&) {  // a damaged manifest is written again below
      if (stripe_moved(ck.dir)) throw;  // not when the drives hold the only copy: read_stripe names what is wrong
    }
  }
  // The experts' bytes come from the shards, or, once moved, from the
  // stripe's drive files (apply_stripe refuses when one is missing), after
  // finishing a move that was cut off.
  Checkpoint through_stripe;
  if (old_moved) {
    Stripe old = read_stripe(ck.dir);
    if (old.punching >= 0) r.bytes_freed += finish_move(ck, old, old_shards);
    through_stripe = ck;
    apply_stripe(through_stripe, /*spine=*/false);
  }
  const Checkpoint& src = old_moved ? through_stripe : ck;
  // Readers: the source's (setup --drives: the hub), else the files of src.
  const std::function<ShardReader()> make_reader = source && source->make_reader && !old_moved
                                                       ? source->make_reader
                                                       : std::function<ShardReader()>([&src] {
                                                           return [&src](int file, uint64_t offset, uint8_t* dst, uint64_t n) {
                                                             read_exact(src.shard_paths[size_t(file)], dst, n, offset);
                                                           };
                                                         });
  uint64_t total = 0, done = 0;
  std::vector<StripeFile*> all;
  for (StripeFile& f : s.files) all.push_back(&f);
  for (StripeFile& f : s.spine_files) all.push_back(&f);
  std::vector<uint64_t> held(all.size(), 0);  // the shards' bytes each file holds
  for (size_t i = 0; i < all.size(); i++) {
    for (const Part& p : file_parts(src, s, *all[i])) held[i] += p.src.length;
    total += held[i];
  }
  std::vector<size_t> to_write;
  for (size_t i = 0; i < all.size(); i++) {
    StripeFile& f = *all[i];
    const std::string folder = parent_dir(f.path);
    fs::create_directories(folder);
    remove_dead_temps(folder, base_name(f.path) + ".tmp.");
    r.drive_bytes[size_t(f.drive)] += held[i];
    if (file_has_size(f.path, f.bytes)) {
      f.hash = trailer_hash(f.path, f.bytes);
      r.kept++;
      done += held[i];
      if (progress) progress(done, total);
      continue;
    }
    to_write.push_back(i);
  }
  // The files still to write, `jobs` at a time (each worker with its own
  // reader); the first failure stops the others and is thrown.
  std::mutex mu;  // the counts and progress
  run_jobs(to_write.size(), source ? source->jobs : 1, [&] {
    return [&, read = make_reader()](size_t k) {
      StripeFile& f = *all[to_write[k]];
      write_file(src, s, f, read, [&](uint64_t n) {
        std::lock_guard<std::mutex> lock(mu);
        done += n;
        if (progress) progress(done, total);
      });
      std::lock_guard<std::mutex> lock(mu);
      r.written++;
      r.bytes_written += f.bytes;
    };
  });
  s.moved = old_moved || (source && source->shards_are_holes);
  bool same = old_paths.size() == all.size() && old_copies == copies;
  for (const StripeFile* f : all) same = same && old_paths.count(f->path);
  r.up_to_date = same && r.written == 0 && r.bytes_freed == 0 && (old_moved || (!move && !s.moved));
  if (!r.up_to_date)
    write_file_atomic(stripe_manifest_path(ck.dir), manifest_json(s, shard_stamps_json(ck)).dump(1) + "\n");
  for (const StripeDrive& d : drives) old_folders.push_back(stripe_folder(d.path, ck.dir));
  remove_unnamed(s, old_folders);
  if (move && !old_moved) r.bytes_freed += move_experts(ck, s);
  return r;
}

bool stripe_moved(const std::string& dir) {
  if (!fs::exists(stripe_manifest_path(dir))) return false;
  try {
    return read_manifest(dir).value("moved", false);
  } catch (const Error&) {  // damaged: taken as moved if it may have said so
    std::ifstream in(stripe_manifest_path(dir));
    std::stringstream text;
    text << in.rdbuf();
    return text.str().find("\"moved\"") != std::string::npos;
  }
}

Stripe read_stripe(const std::string& dir) {
  const json j = read_manifest(dir);
  Stripe s;
  s.dir = dir;
  try {
    s.span_bytes = j.at("span_bytes").get<uint64_t>();
    s.stride = j.at("stride").get<uint64_t>();
    s.copies = j.value("copies", 1);  // absent: one (stripes written before copies)
    s.moved = j.value("moved", false);
    s.punching = j.value("punching", -1);
    for (const json& d : j.at("drives")) s.drives.push_back({d.at("path").get<std::string>(), d.at("weight").get<double>()});
    for (const json& jf : j.at("files")) {
      StripeFile f;
      f.drive = jf.at("drive").get<int>();
      f.layer = jf.at("layer").get<int>();
      f.experts = jf.at("experts").get<std::vector<int>>();
      f.path = jf.at("path").get<std::string>();
      f.bytes = jf.at("bytes").get<uint64_t>();
      f.hash = std::stoull(jf.at("fnv1a64").get<std::string>(), nullptr, 16);
      if (f.drive < 0 || f.drive >= int(s.drives.size()) || f.bytes != s.stride * f.experts.size() + kTrailer)
        fail(stripe_manifest_path(dir), "stripe manifest is inconsistent (file " + f.path + ")");
      s.files.push_back(std::move(f));
    }
    for (const json& jf : j.value("spine_files", json::array())) {
      StripeFile f;
      f.drive = jf.at("drive").get<int>();
      f.layer = -1;
      f.shard = jf.at("shard").get<int>();
      f.tensors = jf.at("tensors").get<std::vector<std::string>>();
      f.offsets = jf.at("offsets").get<std::vector<uint64_t>>();
      f.path = jf.at("path").get<std::string>();
      f.bytes = jf.at("bytes").get<uint64_t>();
      f.hash = std::stoull(jf.at("fnv1a64").get<std::string>(), nullptr, 16);
      bool ok = f.drive >= 0 && f.drive < int(s.drives.size()) && f.tensors.size() == f.offsets.size() &&
                !f.tensors.empty() && f.bytes >= kTrailer;
      for (size_t i = 0; ok && i < f.offsets.size(); i++)
        ok = f.offsets[i] % kIoAlign == 0 && f.offsets[i] < f.bytes - kTrailer && (i == 0 || f.offsets[i] > f.offsets[i - 1]);
      if (!ok) fail(stripe_manifest_path(dir), "stripe manifest is inconsistent (file " + f.path + ")");
      s.spine_files.push_back(std::move(f));
    }
  } catch (const json::exception& e) {
    fail(stripe_manifest_path(dir), std::string("stripe manifest is malformed: ") + e.what());
  }
  return s;
}

namespace {
// A [layer][expert] table shaped like ck.experts, made on first use (most
// models have no stripe, or no copies, and keep it empty).
template <class T>
void size_like_experts(std::vector<std::vector<T>>& table, const Checkpoint& ck) {
  if (!table.empty()) return;
  table.resize(ck.experts.size());
  for (size_t l = 0; l < ck.experts.size(); l++) table[l].resize(ck.experts[l].size());
}
}  // namespace

StripeUse apply_stripe(Checkpoint& ck, bool spine) {
  StripeUse u;
  const std::string manifest = stripe_manifest_path(ck.dir);
  if (!fs::exists(manifest)) return u;
  u.present = true;
  const json j = read_manifest(ck.dir);
  u.moved = j.value("moved", false);
  const int punching = j.value("punching", -1);
  if (punching >= 0)
    fail(manifest, "a `sluice stripe --move` was cut off while freeing the experts' bytes of " +
                       (size_t(punching) < ck.shard_paths.size() ? base_name(ck.shard_paths[size_t(punching)]) : "a shard") +
                       ": run `sluice stripe --model " + ck.dir + " --drives ... --move` again to finish it");
  const std::string stale = shard_stamps_differ(j.at("shards"), ck);
  if (!stale.empty()) {
    if (u.moved)
      fail(manifest, "the experts were moved to the drives (stripe --move), and " + stale +
                         ": the shards hold holes where the experts were. Put back the shards the stripe was made from, or, "
                         "once the model is installed again (sluice setup), remove " + manifest);
    u.warnings.push_back(manifest + ": stripe is stale (" + stale + "); reading the experts from the shards; run `sluice stripe --model " +
                         ck.dir + " --drives ...` again");
    return u;
  }
  const Stripe s = read_stripe(ck.dir);
  if (s.span_bytes != ck.config.expert_span_bytes()) fail(manifest, "stripe span size differs from the checkpoint's");
  std::map<int, int> missing, missing_spine;  // drive -> files not usable
  std::map<int, int> device_of_drive;  // drive -> its reader device (1..)
  // A drive file joins ck's file list, read on its drive's own queue; its id.
  const auto add_file = [&](const StripeFile& f) {
    const int id = int(ck.shard_paths.size());
    ck.shard_paths.push_back(f.path);
    ck.shard_sizes.push_back(f.bytes);
    if (!device_of_drive.count(f.drive)) {
      device_of_drive[f.drive] = int(u.drives.size()) + 1;
      u.drives.push_back(s.drives[size_t(f.drive)].path);
      u.drive_weights.push_back(s.drives[size_t(f.drive)].weight);
    }
    u.file_devices.resize(ck.shard_paths.size(), 0);
    u.file_devices[size_t(id)] = device_of_drive[f.drive];
    return id;
  };
  for (const StripeFile& f : s.files) {
    if (f.layer < 0 || f.layer >= int(ck.experts.size()) || ck.experts[size_t(f.layer)].empty())
      fail(manifest, "stripe names layer " + std::to_string(f.layer) + ", which has no routed experts");
    if (!file_has_size(f.path, f.bytes)) {
      missing[f.drive]++;
      continue;
    }
    const int id = add_file(f);
    for (size_t i = 0; i < f.experts.size(); i++) {
      const int e = f.experts[i];
      if (e < 0 || e >= int(ck.experts[size_t(f.layer)].size())) fail(manifest, "stripe names expert " + std::to_string(e));
      size_like_experts(u.shard_spans, ck);
      const FileSpan here{id, s.stride * i, s.span_bytes};
      FileSpan& shard = u.shard_spans[size_t(f.layer)][size_t(e)];
      if (shard.length == 0) {  // its first drive copy: the one ck points at
        shard = ck.experts[size_t(f.layer)][size_t(e)];
        ck.experts[size_t(f.layer)][size_t(e)] = here;
        continue;
      }
      size_like_experts(u.copy_spans, ck);
      u.copy_spans[size_t(f.layer)][size_t(e)].push_back(here);
    }
    u.files_used++;
  }
  if (!spine && !s.spine_files.empty())
    u.warnings.push_back(manifest + ": the spine is read from the spine pack, not from the stripe's spine files");
  for (const StripeFile& f : s.spine_files) {
    if (!spine) break;
    for (size_t i = 0; i < f.tensors.size(); i++) {
      const TensorInfo* t = ck.find(f.tensors[i]);
      if (!t || t->shard != f.shard || f.offsets[i] + t->nbytes > f.bytes - kTrailer)
        fail(manifest, "stripe's spine file " + f.path + " does not fit tensor " + f.tensors[i] + " of the checkpoint");
    }
    if (!file_has_size(f.path, f.bytes)) {
      missing_spine[f.drive]++;
      continue;
    }
    const int id = add_file(f);
    for (size_t i = 0; i < f.tensors.size(); i++) {
      TensorInfo& t = ck.tensors.at(f.tensors[i]);
      t.shard = id;
      t.offset = f.offsets[i];
      u.spine_tensors++;
    }
  }
  if (u.moved && !missing.empty()) {  // the drives hold the only copy: every expert needs one there
    int lost = 0;
    for (size_t l = 0; l < ck.experts.size(); l++)
      for (size_t e = 0; e < ck.experts[l].size(); e++) lost += u.shard_spans.empty() || u.shard_spans[l][e].length == 0;
    std::string names;
    for (const auto& [d, n] : missing) names += (names.empty() ? "" : ", ") + s.drives[size_t(d)].path;
    if (lost > 0)
      fail(manifest, std::to_string(lost) + " experts are on no drive (stripe files missing or cut short on " + names +
                         "), and they were moved off the shards (stripe --move): put the drive back, its files are their only copy");
  }
  for (const auto& [d, n] : missing)
    u.warnings.push_back("drive " + s.drives[size_t(d)].path + ": " + std::to_string(n) +
                         " stripe file(s) missing or cut short; reading their experts from " +
                         (u.moved ? "their other copies" : s.copies > 1 ? "their other copies (or the shards)" : "the shards"));
  for (const auto& [d, n] : missing_spine)
    u.warnings.push_back("drive " + s.drives[size_t(d)].path + ": " + std::to_string(n) +
                         " spine stripe file(s) missing or cut short; reading their tensors from the shards");
  return u;
}


std::vector<std::string> verify_stripe(const Checkpoint& ck, bool repair) {
  std::vector<std::string> problems;
  const Stripe s = read_stripe(ck.dir);
  const std::string stale = shard_stamps_differ(read_manifest(ck.dir).at("shards"), ck);
  if (!stale.empty()) problems.push_back(stripe_manifest_path(ck.dir) + ": stripe is stale (" + stale + ")");
  if (s.punching >= 0) problems.push_back(stripe_manifest_path(ck.dir) + ": a `stripe --move` was cut off; run it again to finish");
  std::vector<StripeFile> all = s.files;
  all.insert(all.end(), s.spine_files.begin(), s.spine_files.end());
  bool repairable = !stale.empty() && !s.moved;  // a stale manifest is made again
  for (const StripeFile& f : all) {
    try {
      check_file(ck, s, f);
    } catch (const Error& e) {
      problems.push_back(e.what());
      if (!repair) continue;
      if (s.moved && f.layer >= 0) {  // its bytes are nowhere else
        problems.back() += " (not repaired: the experts were moved off the shards, this file was their only copy)";
        continue;
      }
      fs::remove(f.path);  // written again below
      repairable = true;
    }
  }
  if (repairable) {
    write_stripe(ck, s.drives, s.copies, {}, !s.spine_files.empty());
    return verify_stripe(ck, false);
  }
  return problems;
}

std::vector<std::vector<std::pair<uint64_t, FileSpan>>> moved_expert_spans(const Checkpoint& ck, const StripeUse& u) {
  std::vector<std::vector<std::pair<uint64_t, FileSpan>>> out(ck.shard_paths.size());
  for (size_t l = 0; l < u.shard_spans.size(); l++)
    for (size_t e = 0; e < u.shard_spans[l].size(); e++) {
      const FileSpan& shard = u.shard_spans[l][e];
      if (shard.length) out[size_t(shard.file)].push_back({shard.offset, ck.experts[l][e]});
    }
  for (auto& v : out) std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

int stripe_drive_of(const Stripe& s, const std::string& path) {
  for (const StripeFile& f : s.files)
    if (f.path == path) return f.drive;
  for (const StripeFile& f : s.spine_files)
    if (f.path == path) return f.drive;
  return -1;
}

}  // namespace sluice
