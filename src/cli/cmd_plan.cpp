// sluice plan — what the engine would keep in RAM for a model under a budget,
// what a decode step would read and compute, and the seconds per token that
// follow from this machine's kernels and the given disk.
//   sluice plan -m DIR | --preset k3  [--ram-budget 64G] [--dest DIR | --disk-gbps 7]
//               [--spine bf16|lossless|int8] [--spine-pack FILE] [--cores N] [--hit-rate H]
//
// The first line answers in words: will it run, about how many seconds a
// token and a 300-token answer take, the disk it needs; a "noisy" line
// follows when the kernel or disk measurements spread over their rounds. The
// disk is measured (random expert-sized O_DIRECT reads, io/bandwidth_probe.h)
// unless --disk-gbps says; the hit rate is the one the cache's size justifies
// (justified_hit_rate) unless --hit-rate says.
// The plan is the model's preview (model/preview.h; for K3 k3/model.h's
// plan_memory), the one open_model() follows; for --preset k3 it runs on K3's
// shipped config (k3/k3_config.h) with no weights.
//
// Projection: the spine streams through a ring that a loader thread keeps
// ahead of the computation, so its reads overlap compute. A layer's routed
// experts are known only once its router has run; the prefetch guesses (the
// previous token's route) read the ones they catch (--guess-recall) a layer
// ahead, beside one layer's compute, with the wrong guesses (--guess-waste)
// on the same disk; the misses no guess caught are read while compute waits.
// Nothing of a step's own is read through its token boundary (the head, the
// layers before the first MoE layer, that layer's attention and router), so
// the critical path is also at least that boundary plus every expert byte at
// the disk rate. A step takes the larger of the I/O floor (every byte / disk
// rate: one disk serves both) and that critical path (docs/benchmarks.md,
// "`sluice plan` against `bench`").
//
// Compute floor: the engine's own decode compute as `sluice bench
// --save-compute` measured it on this machine (engine/compute_profile.h: the
// median of the latest runs, scaled to this step's kernel bytes), else the
// kernel probe's rates (kernels/rate_probe.h) over this step's bytes; the
// output says which.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "base/memory_limit.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/layout.h"
#include "engine/compute_profile.h"
#include "cli/commands.h"
#include "cli/model_args.h"
#include "cli/plan_gpu.h"
#include "cli/spine_option.h"
#include "io/bandwidth_probe.h"
#include "io/stripe.h"
#include "io/span_reader.h"
#include "kernels/rate_probe.h"

namespace sluice::cli {
namespace {

// The lossless pack's size on nanoK3's trained spine (docs/packs.md: 0.665 of
// the bf16 bytes; synthetic k3-slice weights pack smaller, ~0.63, and are not
// what a real K3 would give).
constexpr double kLosslessRatio = 0.665;

struct PlanArgs {
  std::string model, preset, ram, spine, spine_pack, reserve, dest;
  std::string disk_gbps;  // one rate per drive, "7" or "7,7,3.5"; empty: measure the disk (of --dest, else the model's, else the current folder)
  double disk_probe_seconds = 1.5;
  double hit_rate = -1;  // -1: what the cache's size justifies (justified_hit_rate)
  double guess_waste = 0, guess_recall = 0, lossless_ratio = kLosslessRatio, probe_seconds = 0.6;
  int max_context = 4096, cores = 0, chunk_tokens = 256, probe_rounds = 8;
  bool kernel_probe = false, allow_unknown = false;
  bool stripe_spine = false;  // --stripe-spine: the spine striped too (stripe --spine)
  PlanGpuArgs gpu;  // --gpu, --vram, --pcie-gbps, ... (cli/plan_gpu.h)
};

double gb(double b) { return b / 1e9; }

// Measurements whose rounds spread more than this (fastest / slowest) are
// called noisy: the projection may be off by about as much.
constexpr double kNoisySpread = 1.25;
constexpr double kAssumedDiskGbps = 7;  // a PCIe 4 NVMe drive, when the disk cannot be measured

// The disk's O_DIRECT read rate for the projection, and how it was had.
struct DiskRate {
  double gbps = kAssumedDiskGbps;
  std::string how;    // for the output: "--disk-gbps", "measured on ...", "assumed ...: why"
  double spread = 1;  // fastest round / slowest
  int rounds = 0;     // 0: not measured
  // Several drives (--disk-gbps 7,7,3.5): gbps is the experts' striped rate;
  // the spine streams from the model folder's own drive, the first listed.
  double spine_gbps = 0;  // 0: gbps (one drive)
  std::string spine_where = "";  // with spine_gbps: where the spine is read, for the I/O floor line
};

uint64_t free_bytes(const std::string& dir) {
  struct statvfs v {};
  if (statvfs(dir.c_str(), &v) != 0) return 0;
  return uint64_t(v.f_bavail) * uint64_t(v.f_frsize);
}

// Random reads of `read_bytes` (one expert span) over `files` as the engine's
// expert reader makes them, at the queue depth saved for the disk of `where`:
// three rounds of `seconds` / 3, sorted. Throws when a read fails; *direct
// false when the file system refused O_DIRECT.
std::vector<double> read_rounds(const std::vector<std::string>& files, const std::string& where, uint64_t read_bytes,
                                double seconds, bool* direct) {
  if (read_bytes < 4096) fail(where, "no file large enough to measure");
  ProbeOptions o;
  o.read_bytes = read_bytes;
  o.budget_bytes = 64ull << 30;
  o.max_seconds = seconds / 3;
  o.reader.queue_depth = default_queue_depth(where);
  std::vector<double> rates;
  for (int round = 0; round < 3; round++) {
    const ProbeResult r = measure_read_ceiling(files, o);
    rates.push_back(r.gbps);
    *direct = *direct && r.direct;
  }
  std::sort(rates.begin(), rates.end());
  return rates;
}

DiskRate assumed_disk(const std::string& why) {
  return {kAssumedDiskGbps, "assumed " + std::to_string(int(kAssumedDiskGbps)) + " GB/s: " + why + " (--disk-gbps to say)"};
}

// Three rounds on `files`, or (none given) on a 1 GiB scratch file written
// in `where` and deleted after: the median, and the rounds' spread.
DiskRate measure_files(const PlanArgs& a, std::vector<std::string> files, const std::string& where, uint64_t read_bytes) {
  constexpr uint64_t kScratch = 1ull << 30;
  std::string scratch;
  if (files.empty()) {
    if (free_bytes(where) < 2 * kScratch) return assumed_disk(where + " has no 2 GB free for a scratch file to measure");
    scratch = where + "/.sluice-plan-probe-" + std::to_string(getpid());
    files = {scratch};
  }
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      if (!path.empty()) std::remove(path.c_str());
    }
  } cleanup{scratch};
  std::vector<double> rates;
  bool direct = true;
  try {
    if (!scratch.empty()) write_probe_file(scratch, kScratch);
    rates = read_rounds(files, where, read_bytes, a.disk_probe_seconds, &direct);
  } catch (const std::exception& e) {
    return assumed_disk("measuring failed (" + std::string(e.what()) + ")");
  }
  if (!direct)
    return assumed_disk("the file system of " + where + " refused O_DIRECT, so a read test measures the page cache");
  char how[300];
  std::snprintf(how, sizeof how, "measured on the disk of %s: random %.1f MB O_DIRECT reads%s, median of 3 rounds",
                where.c_str(), double(read_bytes) / 1e6, scratch.empty() ? " of the shards" : " of a scratch file");
  return {rates[1], how, rates.back() / std::max(rates.front(), 1e-9), 3};
}

// A model whose experts a stripe lays over drives (io/stripe.h): each drive
// read on its own stripe files, the experts' rate the busiest drive's share
// of a layer sets (with copies, the drives' sum: each chunk comes from the
// drive that frees first); the spine's from its drives (stripe --spine),
// else from the shards' disk, read on the shards unless they hold holes
// (stripe --move): spine_rate(moved) measures that disk. Empty when no stripe is used.
std::optional<DiskRate> measure_stripe(const PlanArgs& a, const Checkpoint& ck, uint64_t read_bytes,
                                       const std::function<double(bool moved)>& spine_rate) {
  if (!a.disk_gbps.empty() || !a.dest.empty() || layout_only(ck)) return std::nullopt;
  Checkpoint striped = ck;
  StripeUse u;
  Stripe s;
  try {
    u = apply_stripe(striped);
    if (u.drives.empty()) return std::nullopt;  // none, or stale: the shards are read
    s = read_stripe(ck.dir);
  } catch (const Error& e) {
    return assumed_disk(std::string("the model's stripe does not open: ") + e.what());
  }
  const double seconds = a.disk_probe_seconds / double(u.drives.size() + 1);
  std::vector<double> rates;
  std::string each;
  try {
    bool direct = true;
    for (size_t d = 0; d < u.drives.size(); d++) {
      std::vector<std::string> files;
      for (size_t f = 0; f < striped.shard_paths.size(); f++)
        if (u.file_devices.size() > f && u.file_devices[f] == int(d) + 1) files.push_back(striped.shard_paths[f]);
      rates.push_back(read_rounds(files, u.drives[d], read_bytes, seconds, &direct)[1]);
      char one[64];
      std::snprintf(one, sizeof one, "%s%.2f", d ? "/" : "", rates.back());
      each += one;
    }
    if (!direct) return assumed_disk("a drive of the stripe refused O_DIRECT");
  } catch (const std::exception& e) {
    return assumed_disk(std::string("measuring the stripe's drives failed (") + e.what() + ")");
  }
  std::vector<double> share(u.drives.size(), 0);  // one layer's experts on each drive (by its device)
  for (const StripeFile& f : s.files)
    if (f.layer == s.files[0].layer)
      for (size_t d = 0; d < u.drives.size(); d++)
        if (u.drives[d] == s.drives[size_t(f.drive)].path) share[d] += double(f.experts.size()) / s.copies;
  double sum = 0, slowest = 0, experts = 0;
  for (size_t d = 0; d < rates.size(); d++) {
    sum += rates[d], experts += share[d];
    slowest = std::max(slowest, share[d] / std::max(rates[d], 1e-9));
  }
  DiskRate r;
  r.gbps = s.copies > 1 || slowest <= 0 ? sum : experts / slowest;
  r.spine_gbps = u.spine_tensors > 0 ? sum : spine_rate(s.moved);
  r.spine_where = u.spine_tensors > 0 ? "striped over the drives" : "the shards' disk";
  char how[400];
  std::snprintf(how, sizeof how,
                "measured on the %zu drives of the stripe (%s GB/s, random %.1f MB O_DIRECT reads of its files; %d "
                "cop%s), the spine %.2f GB/s %s",
                u.drives.size(), each.c_str(), double(read_bytes) / 1e6, s.copies, s.copies == 1 ? "y" : "ies",
                r.spine_gbps, u.spine_tensors > 0 ? "over the drives (stripe --spine)" : s.moved ? "on a scratch file beside the shards (their experts are holes)" : "on the shards");
  r.how = how;
  r.rounds = 3;
  return r;
}

// The disk's rate for expert-sized reads: given (--disk-gbps), measured on a
// model's stripe (measure_stripe), on the model's shards when there, else on
// a scratch file in --dest (or the current folder), deleted after. Three
// rounds; the median rate, and their spread.
DiskRate measure_disk(const PlanArgs& a, const Checkpoint& ck, uint64_t read_bytes) {
  if (!a.disk_gbps.empty()) {
    const StripedRate r = striped_rate(a.disk_gbps, ck.config.num_experts);  // several drives: io/stripe.h
    if (r.drives == 1) return {r.gbps, "given (--disk-gbps)"};
    DiskRate d{r.gbps, "given (--disk-gbps " + a.disk_gbps + ": " + std::to_string(r.drives) + " drives, experts per layer " +
                        r.placement + (a.stripe_spine ? "; the spine striped over them" : "; the spine on the first") + ")"};
    // The spine on the first drive, or split by bytes in proportion to the
    // rates (stripe --spine): read at their sum.
    d.spine_gbps = a.stripe_spine ? r.sum_gbps : r.first_gbps;
    d.spine_where = a.stripe_spine ? "striped over the drives" : "the first drive";
    return d;
  }
  const auto on_shards = [&] {
    const uint64_t largest = *std::max_element(ck.shard_sizes.begin(), ck.shard_sizes.end());
    return measure_files(a, ck.shard_paths, ck.dir, std::min(read_bytes, largest / 4096 * 4096));
  };
  const auto on_scratch = [&](const std::string& where) { return measure_files(a, {}, where, read_bytes); };
  const auto spine_disk = [&](bool moved) { return (moved ? on_scratch(ck.dir) : on_shards()).gbps; };
  if (std::optional<DiskRate> striped = measure_stripe(a, ck, read_bytes, spine_disk)) return *striped;
  if (!layout_only(ck) && a.dest.empty()) return on_shards();
  return on_scratch(a.dest.empty() ? "." : a.dest);
}

// The expert-cache hit rate the plan can stand behind, and why: every expert
// in the cache -- each is read once, then only hit; part of them -- the
// cache's share of all experts, what routing spread evenly over them would
// hit (real routing repeats experts from token to token, so it is a floor).
struct HitRate {
  double rate = 0;
  std::string why;
};

HitRate justified_hit_rate(const PlanArgs& a, double slots, double all_experts, uint64_t cache_bytes) {
  char why[300];
  if (a.hit_rate >= 0) return {a.hit_rate, "given (--hit-rate)"};
  if (all_experts <= 0) return {0, "no routed experts"};
  if (slots >= all_experts) {
    std::snprintf(why, sizeof why,
                  "every expert fits in the %.1f GB cache: once each has been read (the first answers read them), "
                  "a token reads none",
                  gb(double(cache_bytes)));
    return {1.0, why};
  }
  const double share = slots / all_experts;
  std::snprintf(why, sizeof why,
                "the cache holds %.1f %% of all experts: what routing spread evenly would hit (real routing repeats "
                "experts, so more; --hit-rate to say)",
                100 * share);
  return {share, why};
}

// Disk a full install takes (spine, embedding, routed experts) and a stream
// install (all but the routed experts, which are fetched as used).
struct DiskNeed {
  double full = 0, stream = 0;
};

DiskNeed disk_need(const Checkpoint& ck, const ModelPreview& model) {
  const ModelConfig& c = ck.config;
  double experts = 0;
  for (const auto& layer : ck.experts)
    for (const FileSpan& e : layer) experts += double(e.length);
  if (!layout_only(ck)) {
    double full = 0;
    for (uint64_t b : ck.shard_sizes) full += double(b);
    return {full, full - experts};
  }
  const double spine = double(c.vocab_size) * c.hidden_size * 2 + model.dense_bytes();  // the embedding table, the spine
  for (int l = 0; l < c.num_hidden_layers; l++)
    if (c.is_moe_layer(l)) experts += double(c.num_experts) * double(c.expert_span_bytes());
  return {spine + experts, spine};
}

std::string disk_size(double bytes) {
  char s[40];
  if (bytes >= 1e12) std::snprintf(s, sizeof s, "%.2f TB", bytes / 1e12);
  else if (bytes >= 1e10) std::snprintf(s, sizeof s, "%.0f GB", bytes / 1e9);
  else std::snprintf(s, sizeof s, "%.2f GB", bytes / 1e9);
  return s;
}

std::string capitalized(std::string s) {
  if (!s.empty()) s[0] = char(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

// "about 12 s per token (a 300-token answer in about 60 minutes)".
std::string speed_words(double s_per_token) {
  char s[160];
  const double answer = 300 * s_per_token;
  std::snprintf(s, sizeof s, s_per_token >= 10 ? "about %.0f s per token" : s_per_token >= 0.1 ? "about %.1f s per token"
                                                                                                : "about %.3f s per token",
                s_per_token);
  std::string out = s;
  if (answer < 90) std::snprintf(s, sizeof s, " (a 300-token answer in about %.0f seconds)", std::max(answer, 1.0));
  else if (answer < 5400) std::snprintf(s, sizeof s, " (a 300-token answer in about %.0f minutes)", answer / 60);
  else std::snprintf(s, sizeof s, " (a 300-token answer in about %.1f hours)", answer / 3600);
  return out + s;
}

// The first line: the answer in words (will it run, how fast, the disk it
// needs); then a line when a measurement was noisy.
void print_answer(const PlanArgs& a, const Checkpoint& ck, const std::string& name, const MemoryPlan& p,
                  double projected, const DiskNeed& need, const kernels::KernelRates& r, const DiskRate& disk) {
  const MemoryLimit usable = usable_memory();
  const std::string where = !a.ram.empty() && usable.bytes > 0 && p.budget > usable.bytes
                                ? "with " + format_bytes(p.budget) + " of RAM (more than " + describe(usable) + ")"
                                : "here (budget " + format_bytes(p.budget) + ")";
  std::string needs = layout_only(ck) ? "needs " + disk_size(need.full) + " of disk (a stream install: " +
                                            disk_size(need.stream) + ")"
                                      : "reads " + disk_size(need.full) + " installed in " + ck.dir;
  const uint64_t free = a.dest.empty() ? 0 : free_bytes(a.dest);
  if (!a.dest.empty() && double(free) < need.stream) {
    std::printf("%s will not fit on the disk of %s: a stream install needs %s (full: %s), %s is free; with room, %s\n",
                capitalized(name).c_str(), a.dest.c_str(), disk_size(need.stream).c_str(), disk_size(need.full).c_str(),
                disk_size(double(free)).c_str(), speed_words(projected).c_str());
  } else {
    if (!a.dest.empty() && double(free) < need.full)
      needs += "; " + a.dest + " has " + disk_size(double(free)) + " free: room for a stream install, not a full one";
    std::printf("%s will run %s: %s; %s\n", capitalized(name).c_str(), where.c_str(), speed_words(projected).c_str(),
                needs.c_str());
  }
  std::string noisy;
  char part[200];
  if (r.spread > kNoisySpread) {
    std::snprintf(part, sizeof part, "kernel rates spread %.2fx over %d rounds", r.spread, r.rounds);
    noisy += part;
  }
  if (disk.rounds > 0 && disk.spread > kNoisySpread) {
    std::snprintf(part, sizeof part, "%sdisk reads spread %.2fx over %d rounds", noisy.empty() ? "" : ", ", disk.spread,
                  disk.rounds);
    noisy += part;
  }
  if (!noisy.empty())
    std::printf("noisy        %s: this machine was busy while measuring, so the seconds per token may be off by as "
                "much; run plan again when it is idle\n",
                noisy.c_str());
}

// The step model: what one decode step reads, by class, and pushes through
// each kernel, the disk and kernel rates measured here, and the seconds per
// token they project.
struct StepEstimate {
  StepMix mix;
  int moe = 0;                  // MoE layers
  double touched = 0;           // experts a step routes to
  double all_experts = 0, slots = 0;  // experts in all, and the expert cache's slots
  HitRate hit;
  DiskRate disk;
  double missed = 0, wasted = 0, expert_read = 0, embed = 0;  // bytes per token
  double io_bytes = 0, io_floor = 0;
  kernels::KernelRates r;
  int cores = 0;
  double scale = 1;  // per-core rates times N cores
  double bf16_s = 0, int8_s = 0, mxfp4_s = 0, decode_s = 0, kernel_floor = 0;
  std::vector<ComputeProfile> saved;  // bench's saved compute measurements
  int saved_used = 0, boundary_used = 0;
  bool use_saved = false;
  double compute_floor = 0;
  double rate = 0;  // disk bytes per second
  double lead = 0, spill = 0, after_router = 0, guessed_path = 0;
  double boundary = 0, boundary_path = 0, critical = 0, projected = 0;
};

StepEstimate estimate_step(const PlanArgs& a, const Checkpoint& ck, const ModelPreview& model, const MemoryPlan& p) {
  const ModelConfig& c = ck.config;
  StepEstimate e;
  // What one decode step reads, by class, and pushes through each kernel.
  e.mix = model.step_mix(p);
  e.moe = e.mix.moe_layers;
  const double span = double(SpanReader::direct_bytes(0, c.expert_span_bytes()));
  e.touched = e.mix.touched;
  e.all_experts = double(e.moe) * c.num_experts;
  e.slots = std::min(e.all_experts, std::floor(double(p.expert_cache) / std::max(1.0, double(SpanReader::direct_capacity(c.expert_span_bytes())))));
  e.hit = justified_hit_rate(a, e.slots, e.all_experts, p.expert_cache);
  e.disk = measure_disk(a, ck, c.num_experts > 0 ? c.expert_span_bytes() : 16ull << 20);
  e.missed = e.touched * (1.0 - e.hit.rate) * span;
  // Guesses read for nothing: the prefetch reads the previous token's route
  // for the next layer before its router runs, and the experts it guessed
  // wrong (and did not find cached) are read beside the misses, on the same
  // disk; a property of the routing, as the hit rate (bench: prefetch_wasted_bytes_per_token
  // over its missed experts' bytes).
  e.wasted = e.missed * a.guess_waste;
  e.expert_read = e.missed + e.wasted;
  e.embed = double(c.hidden_size) * 2;
  e.io_bytes = e.mix.layers_read + e.mix.head_read + e.expert_read + e.embed;
  // The busiest drive's time: with a stripe the first drive (the model's)
  // streams the spine and reads its share of the experts, which take as long
  // on every drive (shares follow the rates).
  const double spine_gbps = e.disk.spine_gbps > 0 ? e.disk.spine_gbps : e.disk.gbps;
  e.io_floor = (e.io_bytes - e.expert_read) / (spine_gbps * 1e9) + e.expert_read / (e.disk.gbps * 1e9);

  e.r = kernels::measure_kernel_rates(a.cores > 0 ? 1 : 0, a.probe_seconds, a.probe_rounds);
  e.cores = a.cores > 0 ? a.cores : e.r.threads;
  e.scale = a.cores > 0 ? double(a.cores) : 1.0;  // per-core rates times N cores
  e.bf16_s = kernel_seconds({.bf16 = e.mix.bf16}, e.r, e.scale);
  e.int8_s = kernel_seconds({.int8 = e.mix.int8}, e.r, e.scale);
  e.mxfp4_s = kernel_seconds({.mxfp4 = e.mix.mxfp4}, e.r, e.scale);
  e.decode_s = kernel_seconds({.decoded = e.mix.decoded}, e.r, e.scale);
  e.kernel_floor = e.bf16_s + e.int8_s + e.mxfp4_s + e.decode_s;
  // The engine's own measured compute when bench saved one with as many
  // threads (engine/compute_profile.h), scaled to this step's kernel bytes;
  // else the kernels' probe alone.
  if (!a.kernel_probe) e.saved = load_compute_profile(compute_profile_path());
  const double saved_s = saved_compute_s(e.saved, e.cores, e.mix, e.r, &e.saved_used);
  e.use_saved = e.saved_used > 0 && a.cores == 0;
  e.compute_floor = e.use_saved ? saved_s : e.kernel_floor;
  // The experts the cache misses: those the guesses caught (guess_recall of
  // them) are read a layer ahead, beside the previous layer's compute, with the
  // wrong guesses on the same disk; what does not fit in that layer's compute
  // waits, and the misses no guess caught are read after their router, while
  // compute waits.
  e.rate = e.disk.gbps * 1e9;
  e.lead = e.compute_floor / std::max(c.num_hidden_layers, 1);  // one layer's compute
  const double ahead_per_layer = e.moe > 0 ? (e.missed * a.guess_recall + e.wasted) / e.moe / e.rate : 0;
  e.spill = double(e.moe) * std::max(0.0, ahead_per_layer - e.lead);
  e.after_router = e.missed * (1 - a.guess_recall) / e.rate;
  const double expert_wait = e.spill + e.after_router;
  e.guessed_path = e.compute_floor + expert_wait;
  // The token boundary (model/step_mix.h, token_boundary_mix): the head, the
  // layers before the first MoE layer, its attention and router run with no
  // expert read of the step known, and the expert reader sits idle through it
  // (bench's boundary idle matched its token_boundary_s_per_token on the
  // k3-slice). So a step also takes at least that boundary plus the larger of
  // reading every expert byte and the compute left after it. The boundary's
  // time: bench's saved measurement scaled to this model's boundary bytes,
  // else its kernel bytes' share of the compute floor.
  const StepMix boundary_mix = model.token_boundary_mix(p);
  const double saved_boundary = e.use_saved ? saved_boundary_s(e.saved, e.cores, boundary_mix, e.r, &e.boundary_used) : 0;
  e.boundary =
      std::min(e.compute_floor, e.boundary_used > 0 ? saved_boundary
                                                : e.compute_floor * kernel_seconds(boundary_mix, e.r) /
                                                      std::max(kernel_seconds(e.mix, e.r), 1e-12));
  e.boundary_path = e.boundary + std::max(e.expert_read / e.rate, e.compute_floor - e.boundary);
  e.critical = std::max(e.guessed_path, e.boundary_path);
  e.projected = std::max(e.io_floor, e.critical);
  return e;
}

// The lines after the answer: the plan, the bytes per token, the rates, and
// the floors the projection is the larger of.
void print_estimate(const PlanArgs& a, const Checkpoint& ck, const std::string& spine_what, const MemoryPlan& p,
                    const StepEstimate& e) {
  const ModelConfig& c = ck.config;
  std::printf("model        %s%s: %d layers (%d MoE), top-%d of %d experts, expert %.1f MB\n",
              layout_only(ck) ? "Kimi K3, config shipped in src/k3/k3_config.cpp (docs/k3-spec.md §1)" : ck.dir.c_str(),
              layout_only(ck) ? ", no weights" : "", c.num_hidden_layers, e.moe, c.num_experts_per_token, c.num_experts,
              double(c.expert_span_bytes()) / 1e6);
  std::printf("spine        %s: %.3f GB to read in full, %.3f GB in RAM\n", spine_what.c_str(), gb(e.mix.spine_full_read),
              gb(double(p.spine_total)));
  std::printf("budget       %.3f GB (working minimum %.6f GB; process baseline and working buffers %.3f GB)\n",
              gb(double(p.budget)), gb(double(p.minimum)), gb(double(p.baseline + p.working)));
  std::printf("resident     %.3f GB of spine (%s), %.3f GB vectors and routers, %.3f GB sequence state\n",
              gb(double(p.spine_resident_bytes)), p.spine_resident ? "all of it" : "part", gb(double(p.fixed)),
              gb(double(p.state_reserve)));
  std::printf("ring         %.3f GB\n", gb(double(p.ring)));
  std::printf("expert cache %.3f GB: %.0f of %.0f experts (%.2f %%), + %.3f GB in-flight buffers\n",
              gb(double(p.expert_cache)), e.slots, e.all_experts, 100.0 * e.slots / std::max(e.all_experts, 1.0),
              gb(double(p.expert_buffers)));
  std::printf("per token    spine streamed %.3f GB, head streamed %.3f GB, experts %.3f GB (%.0f of %.0f read at "
              "hit rate %.2f; + %.3f GB of wrong guesses at --guess-waste %.2f), embedding row %.6f GB\n",
              gb(e.mix.layers_read), gb(e.mix.head_read), gb(e.expert_read), e.touched * (1.0 - e.hit.rate), e.touched, e.hit.rate,
              gb(e.wasted), a.guess_waste, gb(e.embed));
  std::printf("hit rate     %.2f: %s\n", e.hit.rate, e.hit.why.c_str());
  if (e.disk.rounds > 0)
    std::printf("disk         %.2f GB/s %s (rounds spread %.2fx)\n", e.disk.gbps, e.disk.how.c_str(), e.disk.spread);
  else
    std::printf("disk         %.2f GB/s %s\n", e.disk.gbps, e.disk.how.c_str());
  if (e.disk.spine_gbps > 0)
    std::printf("I/O floor    %.3f s per token: %.3f GB of spine at %.2f GB/s (%s), %.3f GB of experts at %.2f GB/s\n",
                e.io_floor, gb(e.io_bytes - e.expert_read), e.disk.spine_gbps,
                e.disk.spine_where.c_str(), gb(e.expert_read), e.disk.gbps);
  else
    std::printf("I/O floor    %.3f s per token: %.3f GB at %.2f GB/s\n", e.io_floor, gb(e.io_bytes), e.disk.gbps);
  std::printf("kernels      %s %d core%s, %s kernels: bf16 matvec %.2f GB/s, int8 matvec %.2f GB/s, MXFP4 matvec %.2f GB/s, "
              "lossless decode %.2f GB/s (medians of %d interleaved rounds; rounds spread up to %.2fx)\n",
              a.cores > 0 ? "one core's rates measured here (its CPU time), times" : "measured here now (wall time) on",
              e.cores, e.cores == 1 ? "" : "s", e.r.kernels.c_str(),
              e.r.bf16_gbps * e.scale, e.r.int8_gbps * e.scale, e.r.mxfp4_gbps * e.scale, e.r.decode_gbps * e.scale, e.r.rounds, e.r.spread);
  std::printf("kernel floor %.3f s per token: bf16 %.3f GB (%.3f s), int8 %.3f GB (%.3f s), experts %.3f GB (%.3f s), "
              "decode %.3f GB (%.3f s)\n",
              e.kernel_floor, gb(e.mix.bf16), e.bf16_s, gb(e.mix.int8), e.int8_s, gb(e.mix.mxfp4), e.mxfp4_s, gb(e.mix.decoded), e.decode_s);
  if (e.use_saved) {
    double lo = 1e300, hi = 0;
    const ComputeProfile* latest = nullptr;  // of the runs used (the file's last may be of other kernels)
    for (const ComputeProfile& q : e.saved)
      if (run_applies(q, e.cores, e.r)) {
        const double s = scaled_compute_s(q, e.mix, e.r);
        lo = std::min(lo, s), hi = std::max(hi, s), latest = &q;
      }
    std::printf("compute floor %.3f s per token: the engine's decode compute as `sluice bench --save-compute` measured "
                "it, median of %d run%s (%.3f-%.3f s, the latest on %s at %s, %d threads), each scaled to this step's "
                "kernel bytes by the kernels' relative rates (%s)\n",
                e.compute_floor, e.saved_used, e.saved_used == 1 ? "" : "s", lo, hi, latest->model.c_str(),
                latest->when.c_str(), e.cores, compute_profile_path().c_str());
  } else {
    std::printf("compute floor %.3f s per token: the kernel floor (%s)\n", e.compute_floor,
                a.kernel_probe   ? "--kernel-probe"
                : a.cores > 0    ? "--cores: per-core rates"
                : !e.saved.empty() ? "the saved engine runs used another thread count or other kernels"
                                 : "no engine measurement saved: `sluice bench --save-compute` on a resident spine keeps one");
  }
  std::printf("critical path %.3f s per token: the larger of compute floor + %.3f s reading the missed experts no guess "
              "caught (after their router; --guess-recall %.2f) + %.3f s of guessed reads that one layer's compute of "
              "%.3f s does not hide (%.3f s), and the token boundary's %.3f s (%s) + the larger of every expert byte at "
              "the disk rate (%.3f s) and the compute after it (%.3f s) (%.3f s)\n",
              e.critical, e.after_router, a.guess_recall, e.spill, e.lead, e.guessed_path, e.boundary,
              e.boundary_used > 0 ? "`sluice bench --save-compute`'s, scaled to these bytes"
                                : "its kernel bytes' share of the compute floor",
              e.expert_read / e.rate, e.compute_floor - e.boundary, e.boundary_path);
  std::printf(e.projected >= 0.1 ? "projected    %.3f s/token (%s: the larger of the I/O floor and the critical path)\n"
                                : "projected    %.6f s/token (%s: the larger of the I/O floor and the critical path)\n",
              e.projected, e.io_floor >= e.critical ? "I/O-bound" : "compute and expert reads");
}

int run_plan(const PlanArgs& a) {
  if (a.model.empty() == a.preset.empty()) fail("plan", "give either --model DIR or --preset k3 (or k31)");
  const Checkpoint ck =
      !a.preset.empty() ? preset_checkpoint(a.preset) : open_checkpoint_warning(a.model, a.allow_unknown);
  ModelOptions o;
  o.ram_budget = a.ram.empty() ? 0 : parse_byte_size(a.ram, "--ram-budget");
  o.spine = a.spine;
  o.spine_pack = a.spine_pack;
  o.max_context = a.max_context;
  o.whole_process = true;  // as `run` plans: the budget holds the whole process
  o.chunk_tokens = a.chunk_tokens;
  if (!a.reserve.empty()) o.extra_bytes = parse_byte_size(a.reserve, "--reserve");
  // The spine as the engine would bind it (model/preview.h): the checkpoint's
  // pack when there, or a modelled one when lossless or int8 is asked for and
  // there is no pack.
  const std::unique_ptr<ModelPreview> model =
      preview_model(ck, o, a.lossless_ratio,
                    a.lossless_ratio == kLosslessRatio ? "measured on nanoK3's trained spine" : "--lossless-ratio");
  const std::string& spine_what = model->dense_what();
  const std::string name = layout_only(ck) ? ck.dir : "the model in " + ck.dir;
  MemoryPlan p;
  try {
    p = model->plan(o);
  } catch (const Error& e) {
    // The answer first, then the same error as open_model gives, on stderr.
    std::printf("%s will not run %s: %s\n", capitalized(name).c_str(),
                a.ram.empty() ? "here" : ("with a " + a.ram + " budget").c_str(), e.what());
    std::fflush(stdout);
    throw;
  }
  const StepEstimate e = estimate_step(a, ck, *model, p);
  print_answer(a, ck, name, p, e.projected, disk_need(ck, *model), e.r, e.disk);
  print_estimate(a, ck, spine_what, p, e);
  if (a.gpu.given())
    print_plan_gpu(a.gpu, model->placement_request(p),
                   {e.r.bf16_gbps * e.scale, e.r.mxfp4_gbps * e.scale, e.disk.gbps, e.hit.rate,
                    kernels::measure_copy_gbps(0.1)});
  return 0;
}

Command reg("plan", "What the engine would keep resident, read and compute per token, and its seconds per token",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<PlanArgs>();
              auto* model = sub.add_option("-m,--model", a->model, "Model directory");
              sub.add_option("--preset", a->preset,
                             "A known model instead of a directory: k3 (Kimi K3) or k31 (Kimi K3.1 Pro), no weights needed")
                  ->check(CLI::IsMember({"k3", "k31"}))
                  ->excludes(model);
              sub.add_option("--ram-budget,--ram", a->ram,
                             "RAM budget, e.g. 64G (default: 3/4 of this machine's RAM or its cgroup's limit, the smaller)");
              sub.add_option("--disk-gbps", a->disk_gbps,
                             "Disk read bandwidth in GB/s, one per drive for a stripe (7,7,3.5) (default: measured "
                             "on the disk of --dest, else of the model's shards, else of the current folder)");
              sub.add_option("--dest", a->dest,
                             "The folder the model will be installed in: its disk is measured, its free space checked");
              sub.add_option("--disk-probe-seconds", a->disk_probe_seconds, "Time spent measuring the disk (3 rounds)")
                  ->check(CLI::Range(0.05, 60.0));
              sub.add_option("--cores", a->cores, "Project for N cores (per-core kernel rates measured here, times N)")
                  ->check(CLI::Range(1, 4096));
              sub.add_option("--hit-rate", a->hit_rate,
                             "Expected expert-cache hit rate (default: 1 when every expert fits in the cache, else "
                             "the cache's share of all experts)")->check(CLI::Range(0.0, 1.0));
              sub.add_option("--guess-waste", a->guess_waste,
                             "Experts the prefetch guesses read for nothing, per missed expert byte (bench: "
                             "prefetch_wasted_bytes_per_token over the missed experts' bytes)")
                  ->check(CLI::Range(0.0, 10.0));
              sub.add_option("--guess-recall", a->guess_recall,
                             "Missed experts the prefetch guesses read a layer ahead (bench: prefetch_recall; "
                             "default 0: every miss read after its router)")
                  ->check(CLI::Range(0.0, 1.0));
              add_allow_unknown_option(sub, a->allow_unknown);
              sub.add_flag("--stripe-spine", a->stripe_spine,
                           "With several --disk-gbps rates: the spine striped over the drives too (stripe --spine), "
                           "its streamed part read at their summed rate, not from the first drive alone");
              sub.add_flag("--kernel-probe", a->kernel_probe,
                           "Compute floor from the kernel probe alone, not the engine's saved measurement");
              sub.add_option("--lossless-ratio", a->lossless_ratio,
                             "Packed / bf16 bytes when modelling a lossless pack that is not there (default: nanoK3's)")
                  ->check(CLI::Range(0.05, 1.0));
              sub.add_option("-b,--batch-size", a->chunk_tokens, "Prompt tokens per prefill chunk, as `run` and `bench` use")
                  ->check(CLI::Range(1, 1 << 20));
              sub.add_option("--reserve", a->reserve, "RAM the process keeps beside the engine (bench: its probe and replay buffers)");
              sub.add_option("--max-context", a->max_context, "Context the budget reserves state for")
                  ->check(CLI::Range(1, 1 << 24));
              sub.add_option("--probe-seconds", a->probe_seconds, "Time spent measuring the kernels")
                  ->check(CLI::Range(0.01, 60.0));
              sub.add_option("--probe-rounds", a->probe_rounds, "Interleaved rounds of the kernel probe (each rate: the median)")
                  ->check(CLI::Range(1, 1000));
              add_spine_option(sub, a->spine);
              add_spine_pack_option(sub, a->spine_pack);
              add_plan_gpu_options(sub, a->gpu);
              *action = [a] { return run_plan(*a); };
            });

}  // namespace
}  // namespace sluice::cli
