// model/placement.h — the memory plan's third tier: what a GPU smaller than the
// model holds, what the CPU computes from RAM, what streams from disk, and
// the seconds a decode step would take that way (issue 37).
//
// One plan for three tiers, over plain numbers: the architecture says what
// its pieces are (k3/placement.h: placement_request). The RAM plan (MemoryPlan) has already chosen
// which spine pieces are resident in RAM and which stream through the ring;
// this one splits --vram among, in order:
//   overhead  the CUDA context and kernel modules (and whatever else is on the
//             card: --vram bounds what is in use on it)
//   scratch   one call's device buffers (activations, an expert group staged)
//   state     the sequence state's VRAM copies (KDA states, MLA caches)
//   spine     RAM-resident spine pieces (and the routers) mirrored in VRAM,
//             in use order: every spine byte is read by every token, so a
//             byte is worth as much wherever it sits and the pass's order
//             decides (llama.cpp's -ngl: the first layers on the GPU);
//             --gpu-layers N takes only layers < N (N > layers: the head too)
//   tier      what is left: the VRAM expert tier (routed experts kept by key).
// Unless the tier holding every expert first, the spine the rest, projects a
// faster step (a model whose tokens read most of its experts, a bus slower
// than the CPU's RAM read: an expert byte off the card costs more than a spine
// byte on the CPU); without rates (run time), a rule (placement.cpp).
// The rest of the spine is computed by the CPU where it lies (RAM, or the
// ring for streamed pieces): a matrix the GPU does not hold would cross the
// bus on every token, and the CPU reads RAM faster than PCIe moves it
// (--gpu-spill upload keeps the old way, for comparisons). Routed experts the
// tier does not hold are computed on the GPU after an upload when that is
// faster than the CPU in place (by the rates), or always on the CPU with
// --cpu-moe.
//
// --gpu-spill split: the RAM-resident pieces the GPU does not hold are computed
// by both at once, a share of each matrix's rows uploaded (pinned DMA) and
// computed by the GPU while the CPU computes the rest: the bus is a second
// path to RAM, so those bytes go at the CPU's rate plus the bus's.
//
// Uploading per call, a weight off the GPU goes through the scratch arena
// whole: one larger than the arena can grow to (the VRAM the plan leaves) is
// computed by the CPU, as the CUDA entry does — a big head on a small card.
// Split streams the GPU's rows through the arena in blocks, any size.
//
// The projection adds the parts (the execution runs them one after another:
// the GPU's spine, the CPU's spine, the experts, each boundary's activation
// crossing, the KDA states handed back), with the streamed pieces at the
// slower of the disk and the CPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

// Device rates, GB/s (1e9 bytes a second); measured, given or a preset's.
struct GpuRates {
  double pcie_gbps = 0;      // host → device, pinned
  double staging_gbps = 0;   // a one-thread host copy: uploads from pageable RAM go through the pinned staging
                             // at the slower of it and the bus (the spine per call; 0: as pinned)
  double gpu_gemv_gbps = 0;  // weight bytes the GPU's GEMVs read from VRAM
  double cpu_gbps = 0;       // spine bytes the CPU's matvec reads from RAM (its kernel pool)
  double cpu_mxfp4_gbps = 0; // expert bytes the CPU's MXFP4 matvec reads from RAM
  double disk_gbps = 0;      // expert and streamed spine reads
  double crossing_s = 30e-6; // one GPU product call's own cost: an activation in, the result out, a sync
  // --gpu-spill split runs the pinned DMA and the CPU's matvec at once, and
  // they share the host's memory: the part of its rate alone each keeps
  // then (measured: kernels/device.h BusRates; 0: placement.cpp's figures).
  double split_cpu_keeps = 0, split_bus_keeps = 0;
};

// A spine piece as the placement sees it, in use order: one product call's
// weight (a matrix resident whole is one piece, whatever its read pieces).
struct PlacedPiece {
  uint64_t bytes = 0;
  int unit = 0;          // 2l, 2l+1: layer l's attention / FFN; 2L: the head
  bool in_ram = true;    // resident in RAM (else streamed through the ring: never mirrored)
};

struct PlacementRequest {
  uint64_t vram = 0;                     // --vram: bytes in use on the GPU at most
  uint64_t overhead = uint64_t(1) << 30; // the context and modules (measured at run time)
  uint64_t scratch = 0, state = 0;
  uint64_t state_sync = 0;               // sequence state the GPU's recurrence hands back to the host a token
                                         // (KDA states: the host's copy stays whole), bytes
  std::vector<PlacedPiece> pieces;       // use order (routers among them)
  int layers = 0;
  uint64_t expert_bytes = 0;             // one routed expert, every projection
  int moe_layers = 0;
  double touched = 0;                    // experts a token uses (MoE layers x top-k)
  double all_experts = 0;
  double ram_hit = 0;                    // of the experts not in VRAM, found in the RAM cache
  int gpu_layers = -1;                   // --gpu-layers: -1 the plan picks
  bool cpu_moe = false;                  // --cpu-moe
  bool upload_spill = false;             // --gpu-spill upload: pieces off the GPU uploaded per call
  bool split_spill = false;              // --gpu-spill split: RAM pieces off the GPU computed by the CPU and,
                                         // over the bus, the GPU at once (rows shared by their rates)
  bool spill_by_rates = false;           // neither forced: the fastest projection of cpu, upload and split
                                         // (split only where host_room holds split_pin_overhead(resident_spine))
  uint64_t resident_spine = 0;           // the RAM-resident spine's bytes (what split pins)
  uint64_t host_room = UINT64_MAX;       // RAM free under --ram-budget before the model loads (a probe's buffer)
};

enum class PieceWhere { gpu, cpu, stream };  // VRAM / the CPU from RAM / the CPU from the ring

struct Placement {
  uint64_t vram = 0, overhead = 0, scratch = 0, state = 0;
  uint64_t spine_gpu = 0, spine_cpu = 0, spine_stream = 0;  // bytes by where computed
  uint64_t tier = 0;            // VRAM expert tier
  std::vector<PieceWhere> where;  // per piece
  int gpu_layers = 0;           // whole layers (both units) on the GPU
  bool head_gpu = false;
  bool experts_gpu = true;      // experts the tier misses: GPU after upload (else the CPU in place)
  bool experts_first = false;   // the tier took every expert before the spine (a byte of them saves more)
  bool upload_spill = false;
  bool split_spill = false;
  double gpu_share = 0;         // split: the GPU's share of those pieces' rows (0: rates unknown, measured at run time)
  double tier_share = 0;        // touched experts found in the tier (spread evenly: a floor)
  // Projection, seconds per decode step.
  double spine_gpu_s = 0, spine_cpu_s = 0, spine_stream_s = 0, expert_s = 0, crossing_s = 0, step_s = 0;
  double state_s = 0;           // the state handed back: its DMA, then the host's copy out of pinned memory
  double all_cpu_s = 0;         // the same step with --device cpu
  double upload_per_call_s = 0; // the same VRAM with every piece off the GPU uploaded per call
};

Placement plan_placement(const PlacementRequest& r, const GpuRates& rates);
// Host memory pinning `resident_spine` bytes costs beside them (the driver's page lists).
uint64_t split_pin_overhead(uint64_t resident_spine);

// "GPU: layers 0-11 of 61 (11.2 GB spine), tier 3.0 GB; CPU computes: layers
// 12-60 and the head from RAM (98.1 GB); experts: VRAM tier, RAM cache, disk,
// misses computed on the GPU after upload" — one line.
std::string describe_placement(const Placement& p, int layers);
// "0.812 s/token: GPU spine 0.010, CPU spine 0.700, ..." — one line.
std::string describe_projection(const Placement& p);

}  // namespace sluice
