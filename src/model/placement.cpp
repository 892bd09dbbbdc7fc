#include "model/placement.h"

#include <algorithm>
#include <cstdio>

#include "base/bytes.h"

namespace sluice {
namespace {

constexpr uint64_t kScratchBase = uint64_t(64) << 20;  // activations, small uploads
constexpr uint64_t kStateCap = uint64_t(8) << 30;      // the CUDA entry's cap on state copies

double per_byte(double gbps) { return gbps > 0 ? 1.0 / (gbps * 1e9) : 0.0; }

// Split unmeasured (a preset card): the part of its rate alone the CPU's
// matvec keeps while the pinned DMA runs, and the DMA while the matvec runs
// (BusRates on the H100 box of docs/benchmarks.md, sitting G, the medians of
// 24 probes: DMA and cores read the same memory channels).
constexpr double kSplitCpuKeeps = 0.97, kSplitBusKeeps = 0.9;

// Split chosen by the rates: a step at least this much faster than the
// better of the CPU and uploading per call.
constexpr double kSplitMustGain = 0.1;
// Pinned host memory costs the driver a page list: a generous 16 bytes a
// 4 KiB page (what split's pinned spine adds to the process under --ram-budget).
constexpr uint64_t kPinnedBytesPerListByte = 256;

// The bytes of the spine mirrored in VRAM: pieces in use order, each taken
// when it fits in `room` (the CUDA entry mirrors the same way, on first use).
void place_spine(const PlacementRequest& r, uint64_t room, Placement& p) {
  const int unit_limit = r.gpu_layers < 0 ? 1 << 30 : r.gpu_layers > r.layers ? 2 * r.layers + 1 : 2 * r.gpu_layers;
  p.where.assign(r.pieces.size(), PieceWhere::cpu);
  for (size_t i = 0; i < r.pieces.size(); i++) {
    const PlacedPiece& q = r.pieces[i];
    if (!q.in_ram) {
      p.where[i] = PieceWhere::stream;
      p.spine_stream += q.bytes;
    } else if (q.unit < unit_limit && p.spine_gpu + q.bytes <= room) {
      p.where[i] = PieceWhere::gpu;
      p.spine_gpu += q.bytes;
    } else {
      p.spine_cpu += q.bytes;
    }
  }
  // Whole layers on the GPU: both units' pieces placed there, from layer 0.
  std::vector<bool> unit_gpu(size_t(2 * r.layers + 1), true);
  for (size_t i = 0; i < r.pieces.size(); i++)
    if (p.where[i] != PieceWhere::gpu && r.pieces[i].unit >= 0 && r.pieces[i].unit <= 2 * r.layers)
      unit_gpu[size_t(r.pieces[i].unit)] = false;
  p.gpu_layers = 0;
  while (p.gpu_layers < r.layers && unit_gpu[size_t(2 * p.gpu_layers)] && unit_gpu[size_t(2 * p.gpu_layers + 1)])
    p.gpu_layers++;
  p.head_gpu = unit_gpu[size_t(2 * r.layers)];
}

// Seconds a byte of an upload per call takes on the bus: the spine's RAM is
// pageable (pinned only for split), so it goes through the staging copy too.
double staged_per_byte(const GpuRates& g) { return std::max(per_byte(g.pcie_gbps), per_byte(g.staging_gbps)); }

void project(const PlacementRequest& r, const GpuRates& g, Placement& p) {
  const double gpu = per_byte(g.gpu_gemv_gbps), cpu = per_byte(g.cpu_gbps), pcie = per_byte(g.pcie_gbps);
  const double staged = staged_per_byte(g);
  const double disk = per_byte(g.disk_gbps), cpu_mx = per_byte(g.cpu_mxfp4_gbps);
  const double e = double(r.expert_bytes);
  const double moe_layers = r.touched > 0 ? double(r.moe_layers) : 0;
  // The spine off the GPU: the CPU's matvec, or the bus and the GPU's
  // (upload), or both at once on shares of the rows (split: the rates add).
  // Split: each at the part of its rate it keeps beside the other.
  const double cpu_beside = cpu / (g.split_cpu_keeps > 0 ? g.split_cpu_keeps : kSplitCpuKeeps);
  const double bus_beside = pcie / (g.split_bus_keeps > 0 ? g.split_bus_keeps : kSplitBusKeeps);
  const double both = cpu > 0 && pcie + gpu > 0 ? 1.0 / (1.0 / cpu_beside + 1.0 / (bus_beside + gpu)) : cpu;
  if (p.split_spill && cpu > 0 && pcie + gpu > 0) p.gpu_share = both / (bus_beside + gpu);
  // A weight off the GPU goes into the scratch arena whole when uploaded per
  // call; one larger than the arena can grow to (the VRAM nothing else holds)
  // is computed by the CPU instead, as the CUDA entry does (a big head, on a
  // small card). Split streams its GPU share through the arena in blocks: any size.
  const uint64_t held = p.overhead + p.state + p.scratch + p.spine_gpu + p.tier;
  const uint64_t arena = p.scratch + (p.vram > held ? p.vram - held : 0);
  const auto off = [&](uint64_t bytes, bool upload) {
    if (upload) return bytes <= arena ? staged + gpu : cpu;
    return p.split_spill ? both : cpu;
  };
  const auto off_stream = [&](uint64_t bytes, bool upload) {  // the ring is not pinned
    return upload && bytes <= arena ? staged + gpu : cpu;
  };
  // Seconds for the pieces off the GPU, each at the rate its size allows.
  const auto spine_off = [&](PieceWhere where, bool upload) {
    double s = 0;
    for (size_t i = 0; i < p.where.size(); i++) {
      if (p.where[i] != where) continue;
      const uint64_t b = r.pieces[i].bytes;
      s += where == PieceWhere::cpu ? double(b) * off(b, upload) : double(b) * std::max(disk, off_stream(b, upload));
    }
    return s;
  };
  // A bus round trip per run of GPU-computed pieces and per MoE layer's expert
  // group (on the GPU); uploading, every piece is a GPU call.
  int gpu_runs = 0;
  for (size_t i = 0; i < p.where.size(); i++)
    if (p.where[i] == PieceWhere::gpu && (i == 0 || p.where[i - 1] != PieceWhere::gpu)) gpu_runs++;
  const double expert_calls = p.experts_gpu ? moe_layers : 0;
  int cpu_pieces = 0;
  for (PieceWhere w : p.where) cpu_pieces += w == PieceWhere::cpu;
  const auto crossings = [&](bool upload) {
    const double calls = upload ? double(p.where.size()) : double(gpu_runs) + (p.split_spill ? cpu_pieces : 0);
    return g.crossing_s * (calls + expert_calls);
  };
  // Experts: the tier's share on the GPU as they are; the others read from
  // disk when the RAM cache misses, computed where the plan put them.
  const double missed_ram = r.touched * (1 - p.tier_share) * (1 - r.ram_hit) * e * disk;
  const double off_tier = r.touched * (1 - p.tier_share) * e * (p.experts_gpu ? pcie + gpu : cpu_mx);
  p.expert_s = r.touched * p.tier_share * e * gpu + off_tier + missed_ram;
  p.spine_gpu_s = double(p.spine_gpu) * gpu;
  p.spine_cpu_s = spine_off(PieceWhere::cpu, p.upload_spill);
  p.spine_stream_s = spine_off(PieceWhere::stream, p.upload_spill);
  p.crossing_s = crossings(p.upload_spill);
  // Bus down at the pinned rate, then the pool's copy at about the CPU's read rate.
  p.state_s = double(r.state_sync) * (pcie + cpu);
  p.step_s = p.spine_gpu_s + p.spine_cpu_s + p.spine_stream_s + p.expert_s + p.crossing_s + p.state_s;
  // The comparison: the same VRAM, every piece off the GPU uploaded per call.
  p.upload_per_call_s = p.spine_gpu_s + spine_off(PieceWhere::cpu, true) + spine_off(PieceWhere::stream, true) +
                        p.expert_s + crossings(true) + p.state_s;
  const double expert_disk = r.touched * (1 - r.ram_hit) * e * disk;
  p.all_cpu_s = double(p.spine_gpu + p.spine_cpu) * cpu + double(p.spine_stream) * std::max(disk, cpu) +
                r.touched * e * cpu_mx + expert_disk;
}

// VRAM that holds every routed expert in the tier: its slots hold a
// projection each, aligned and maybe padded in the GPU's layout (a 1 % margin,
// at least a MiB a MoE layer).
uint64_t tier_for_all_experts(const PlacementRequest& r) {
  if (r.expert_bytes == 0 || r.all_experts <= 0) return 0;
  const double bytes = r.all_experts * double(r.expert_bytes);
  return uint64_t(bytes + std::max(bytes / 100, double(r.moe_layers) * (1 << 20)));
}

// Unmeasured rates (run time), whether a VRAM byte of routed experts saves
// more than one of spine: a spine byte is read by every token and off the GPU
// the CPU reads it from RAM; an expert byte is read by touched / all of the
// tokens and off the tier it crosses the bus, taken as half the CPU's RAM read
// (a PCIe 4 or 5 x16 slot beside DDR5). So experts go first when a token reads
// more than half of them: the k3-slice (16 of 16 a layer), not K3 (16 of 896).
constexpr double kUnratedBusOfRam = 0.5;
bool experts_save_more_unrated(const PlacementRequest& r) { return r.touched / r.all_experts > kUnratedBusOfRam; }

std::string layer_range(int from, int to) {  // [from, to)
  if (to - from == 1) return "layer " + std::to_string(from);
  return "layers " + std::to_string(from) + "-" + std::to_string(to - 1);
}

std::string gb(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GB", double(b) / 1e9);
  return s;
}

// The spine and the tier in `room`: the spine first and the tier what it
// leaves (tier_first 0), or the tier first (tier_first bytes: every expert)
// and the spine what is left; projected.
Placement place(const PlacementRequest& r, const GpuRates& rates, uint64_t room, uint64_t tier_first, Placement p) {
  if (tier_first > 0) {
    p.experts_first = true;
    p.tier = tier_first;
    place_spine(r, room - tier_first, p);
  } else {
    place_spine(r, room, p);
    p.tier = p.experts_gpu ? room - p.spine_gpu : 0;
  }
  if (r.expert_bytes > 0 && r.all_experts > 0)
    p.tier_share = std::min(1.0, double(p.tier / r.expert_bytes) / r.all_experts);
  project(r, rates, p);
  return p;
}

// The placement with the spill given (what the GPU does not hold: the CPU,
// uploads per call, or both at once).
Placement plan_spilling(const PlacementRequest& r, const GpuRates& rates, bool upload_spill, bool split_spill) {
  Placement p;
  p.vram = r.vram, p.overhead = r.overhead, p.upload_spill = upload_spill, p.split_spill = split_spill;
  p.scratch = r.scratch + kScratchBase;
  p.state = std::min(r.state, kStateCap);
  uint64_t room = 0;
  const uint64_t fixed = p.overhead + p.scratch + p.state;
  if (r.vram > fixed) room = r.vram - fixed;
  // Experts the tier misses: the GPU after an upload, or the CPU in place.
  const double gpu_way = per_byte(rates.pcie_gbps) + per_byte(rates.gpu_gemv_gbps);
  p.experts_gpu = !r.cpu_moe && (rates.cpu_mxfp4_gbps <= 0 || gpu_way <= per_byte(rates.cpu_mxfp4_gbps));
  const uint64_t all_tier = tier_for_all_experts(r);
  const bool may_go_first = p.experts_gpu && r.gpu_layers < 0 && all_tier > 0 && all_tier <= room;
  const Placement spine_first = place(r, rates, room, 0, p);
  if (!may_go_first) return spine_first;
  const Placement experts_first = place(r, rates, room, all_tier, p);
  // Measured rates: the faster projection (pieces are lumps: a tier may cost
  // more spine than its bytes); unmeasured (run time): the rule alone.
  const bool rated = rates.pcie_gbps > 0 && rates.cpu_gbps > 0;
  if (rated ? experts_first.step_s < spine_first.step_s : experts_save_more_unrated(r)) return experts_first;
  return spine_first;
}

}  // namespace

uint64_t split_pin_overhead(uint64_t resident_spine) { return resident_spine / kPinnedBytesPerListByte; }

Placement plan_placement(const PlacementRequest& r, const GpuRates& rates) {
  if (!r.spill_by_rates || rates.cpu_gbps <= 0 || rates.pcie_gbps <= 0)
    return plan_spilling(r, rates, r.upload_spill, r.split_spill);
  // Neither forced: the fastest projection of the three. Split pins the
  // RAM-resident spine (the GPU's rows go up by DMA from it), so it is a
  // candidate only where RAM under --ram-budget holds the driver's page
  // lists for it, and taken only when it gains kSplitMustGain: pinning takes
  // time as the model opens and the share is measured on the first calls.
  Placement best = plan_spilling(r, rates, false, false);
  const Placement upload = plan_spilling(r, rates, true, false);
  if (upload.step_s < best.step_s) best = upload;
  if (r.resident_spine > 0 && split_pin_overhead(r.resident_spine) <= r.host_room) {
    Placement split = plan_spilling(r, rates, false, true);
    if (split.step_s < best.step_s * (1 - kSplitMustGain)) best = split;
  }
  return best;
}

std::string describe_placement(const Placement& p, int layers) {
  std::string gpu = p.gpu_layers > 0 ? layer_range(0, p.gpu_layers) + " of " + std::to_string(layers) : "no whole layer";
  if (p.head_gpu) gpu += " and the head";
  gpu += " (" + gb(p.spine_gpu) + " of spine), expert tier " + gb(p.tier) +
         (p.experts_first ? " (every expert, placed before the spine)" : "") + ", state " + gb(p.state) + ", scratch " +
         gb(p.scratch) + ", context " + gb(p.overhead) + " (of --vram " + gb(p.vram) + ")";
  std::string cpu;
  if (p.spine_cpu == 0 && p.spine_stream == 0)
    cpu = "nothing of the spine";
  else
    cpu = (p.gpu_layers < layers ? layer_range(p.gpu_layers, layers) : std::string("the rest")) +
          (p.head_gpu ? "" : " and the head") + ": " + gb(p.spine_cpu) + " from RAM" +
          (p.spine_stream ? ", " + gb(p.spine_stream) + " streamed from disk" : "");
  if (p.upload_spill) cpu += " (upload: uploaded per call, computed on the GPU)";
  if (p.split_spill && p.spine_cpu > 0) {
    char share[96];
    if (p.gpu_share > 0)
      std::snprintf(share, sizeof share, " (split: %.0f %% of their rows by the GPU over the bus, the spine pinned)",
                    100 * p.gpu_share);
    else
      std::snprintf(share, sizeof share, " (split: a share of their rows by the GPU over the bus, the spine pinned)");
    cpu += share;
  }
  const std::string experts = std::string("VRAM tier, RAM cache, disk; misses computed ") +
                              (p.experts_gpu ? "on the GPU after upload" : "by the CPU in place");
  return "on the GPU: " + gpu + "; the CPU computes: " + cpu + "; experts: " + experts;
}

std::string describe_projection(const Placement& p) {
  char s[400];
  std::snprintf(s, sizeof s,
                "%.4f s/token: GPU spine %.4f s, CPU spine %.4f s, streamed spine %.4f s, experts %.4f s (%.0f %% from "
                "the VRAM tier), bus crossings %.4f s, KDA states back %.4f s; all on the CPU %.4f s/token, the same "
                "VRAM uploading per call %.4f s/token",
                p.step_s, p.spine_gpu_s, p.spine_cpu_s, p.spine_stream_s, p.expert_s, 100 * p.tier_share, p.crossing_s,
                p.state_s, p.all_cpu_s, p.upload_per_call_s);
  return s;
}

}  // namespace sluice
