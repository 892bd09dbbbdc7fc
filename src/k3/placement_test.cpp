// The VRAM placement planner on made-up device rates (CI has no GPU).
#include "k3/placement.h"

#include <gtest/gtest.h>

#include "k3/k3_config.h"
#include "k3/model.h"
#include "k3/spine.h"

namespace sluice {
namespace {

constexpr uint64_t GB = 1000000000ull;

// 4 layers, each an attention and an FFN piece of 1 GB, a 0.5 GB head; all in RAM.
PlacementRequest four_layers() {
  PlacementRequest r;
  r.layers = 4;
  for (int l = 0; l < 4; l++) {
    r.pieces.push_back({GB, 2 * l, true});
    r.pieces.push_back({GB, 2 * l + 1, true});
  }
  r.pieces.push_back({GB / 2, 8, true});
  r.overhead = GB / 2;
  r.scratch = 0;
  r.state = GB / 4;
  r.expert_bytes = 10000000;  // 10 MB
  r.moe_layers = 4;
  r.touched = 4 * 8;
  r.all_experts = 4 * 64;
  r.ram_hit = 1;
  return r;
}

GpuRates rates() {
  GpuRates g;
  g.pcie_gbps = 25, g.gpu_gemv_gbps = 1000, g.cpu_gbps = 50, g.cpu_mxfp4_gbps = 10, g.disk_gbps = 5;
  g.crossing_s = 0;
  g.split_cpu_keeps = g.split_bus_keeps = 1;  // split: neither slows the other (SplitSharesTheHostsMemory: they do)
  return g;
}

uint64_t fixed_of(const Placement& p) { return p.overhead + p.scratch + p.state; }

// A 1 GB scratch arena (a piece off the GPU goes through it whole) and 1 GB
// more VRAM for it: the spine lies as four_layers() with 4 GB places it.
void with_arena(PlacementRequest& r) {
  r.scratch = GB;
  r.vram = 5 * GB;
}

TEST(Placement, SpineGoesToTheGpuInUseOrderWithinTheVram) {
  PlacementRequest r = four_layers();
  r.vram = 4 * GB;  // 4 GB less the fixed parts: three pieces of 1 GB
  const Placement p = plan_placement(r, rates());
  EXPECT_LE(fixed_of(p) + p.spine_gpu + p.tier, r.vram);
  EXPECT_EQ(p.spine_gpu, 3 * GB);
  EXPECT_EQ(p.where[0], PieceWhere::gpu);
  EXPECT_EQ(p.where[2], PieceWhere::gpu);
  EXPECT_EQ(p.where[3], PieceWhere::cpu);
  EXPECT_EQ(p.gpu_layers, 1);  // layer 0 whole, layer 1's attention only
  EXPECT_FALSE(p.head_gpu);
  EXPECT_EQ(p.spine_cpu, 5 * GB + GB / 2);
  // The tier gets what the spine leaves.
  EXPECT_EQ(p.tier, r.vram - fixed_of(p) - p.spine_gpu);
}

TEST(Placement, EverythingFitsOnABigCard) {
  PlacementRequest r = four_layers();
  r.vram = 100 * GB;
  const Placement p = plan_placement(r, rates());
  EXPECT_EQ(p.spine_cpu, 0u);
  EXPECT_EQ(p.gpu_layers, 4);
  EXPECT_TRUE(p.head_gpu);
  EXPECT_DOUBLE_EQ(p.tier_share, 1.0);  // every expert fits in the tier
  EXPECT_NE(describe_placement(p, 4).find("nothing of the spine"), std::string::npos);
}

TEST(Placement, TooLittleVramPutsTheWholeSpineOnTheCpu) {
  PlacementRequest r = four_layers();
  r.vram = GB / 2;  // less than the context alone
  const Placement p = plan_placement(r, rates());
  EXPECT_EQ(p.spine_gpu, 0u);
  EXPECT_EQ(p.tier, 0u);
  EXPECT_EQ(p.gpu_layers, 0);
  EXPECT_NE(describe_placement(p, 4).find("no whole layer"), std::string::npos);
}

TEST(Placement, GpuLayersCapsTheSpineAndLeavesTheRestToTheTier) {
  PlacementRequest r = four_layers();
  r.vram = 100 * GB;
  r.gpu_layers = 2;
  const Placement p = plan_placement(r, rates());
  EXPECT_EQ(p.spine_gpu, 4 * GB);
  EXPECT_EQ(p.gpu_layers, 2);
  EXPECT_FALSE(p.head_gpu);
  EXPECT_EQ(p.tier, r.vram - fixed_of(p) - 4 * GB);
  r.gpu_layers = 5;  // past the last layer: the head too (llama.cpp's -ngl)
  EXPECT_TRUE(plan_placement(r, rates()).head_gpu);
  r.gpu_layers = 0;
  EXPECT_EQ(plan_placement(r, rates()).spine_gpu, 0u);
}

TEST(Placement, StreamedPiecesAreNeverMirrored) {
  PlacementRequest r = four_layers();
  r.vram = 100 * GB;
  r.pieces[1].in_ram = false;
  const Placement p = plan_placement(r, rates());
  EXPECT_EQ(p.where[1], PieceWhere::stream);
  EXPECT_EQ(p.spine_stream, GB);
  EXPECT_EQ(p.gpu_layers, 0);  // layer 0's FFN is not on the GPU
}

TEST(Placement, ExpertsGoWhereTheyComputeFaster) {
  PlacementRequest r = four_layers();
  r.vram = 4 * GB;
  GpuRates g = rates();
  EXPECT_TRUE(plan_placement(r, g).experts_gpu);  // a 10 GB/s CPU kernel loses to a 25 GB/s bus
  g.cpu_mxfp4_gbps = 40;  // a faster CPU kernel than the bus: the CPU in place
  EXPECT_FALSE(plan_placement(r, g).experts_gpu);
  g.cpu_mxfp4_gbps = 100, g.pcie_gbps = 8;  // a slow bus: the CPU in place
  const Placement cpu = plan_placement(r, g);
  EXPECT_FALSE(cpu.experts_gpu);
  EXPECT_EQ(cpu.tier, 0u);
  r.cpu_moe = true;
  g = rates();
  EXPECT_FALSE(plan_placement(r, g).experts_gpu);
}

// four_layers() in pieces of 100 MB: a spine that fills the VRAM to 0.1 GB.
PlacementRequest fine_layers() {
  PlacementRequest r = four_layers();
  std::vector<PlacedPiece> fine;
  for (const PlacedPiece& q : r.pieces)
    for (uint64_t b = 0; b < q.bytes; b += GB / 10) fine.push_back({GB / 10, q.unit, true});
  r.pieces = fine;
  return r;
}

// A model whose tokens read every expert (the k3-slice): off the tier an
// expert byte crosses a 25 GB/s bus where a spine byte is read by a 50 GB/s
// CPU, so the tier takes every expert first and the spine what is left.
TEST(Placement, ExpertsEveryTokenReadsGoBeforeTheSpine) {
  PlacementRequest r = fine_layers();
  r.all_experts = r.touched;  // 32 experts of 10 MB, all read by every token: 0.32 GB (+ the tier's margin)
  r.vram = uint64_t(3.75 * GB);  // 2.93 GB after the fixed parts
  const Placement first = plan_placement(r, rates());
  EXPECT_TRUE(first.experts_first);
  EXPECT_GE(first.tier, 32 * r.expert_bytes);
  EXPECT_DOUBLE_EQ(first.tier_share, 1.0);
  EXPECT_LE(fixed_of(first) + first.spine_gpu + first.tier, r.vram);
  EXPECT_EQ(first.spine_gpu, 26 * GB / 10);
  EXPECT_NE(describe_placement(first, 4).find("every expert, placed before the spine"), std::string::npos);
  // The spine first (--gpu-layers: the user's order) projects slower.
  r.gpu_layers = 5;
  const Placement spine_first = plan_placement(r, rates());
  EXPECT_FALSE(spine_first.experts_first);
  EXPECT_EQ(spine_first.spine_gpu, 29 * GB / 10);
  EXPECT_LT(first.step_s, spine_first.step_s);
  r.gpu_layers = -1;
  // A bus faster than the CPU's RAM read: a spine byte saves more.
  GpuRates fast = rates();
  fast.pcie_gbps = 200;
  EXPECT_FALSE(plan_placement(r, fast).experts_first);
  // Not every expert fits: the spine first (a tier smaller than what every token reads would only churn).
  r.expert_bytes = 100000000;  // 32 x 100 MB > 2.93 GB
  EXPECT_FALSE(plan_placement(r, rates()).experts_first);
  // Unmeasured rates (run time): experts first when a token reads more than half of them.
  r.expert_bytes = 10000000;
  EXPECT_TRUE(plan_placement(r, GpuRates{}).experts_first);
  r.all_experts = 4 * 64;  // 8 of 64 a layer: the spine first, measured or not
  EXPECT_FALSE(plan_placement(r, GpuRates{}).experts_first);
  EXPECT_FALSE(plan_placement(r, rates()).experts_first);
}

TEST(Placement, ProjectionAddsThePartsAtTheirRates) {
  PlacementRequest r = four_layers();
  with_arena(r);  // room for a 1 GB piece off the GPU: the spine placed as with 4 GB
  const GpuRates g = rates();
  const Placement p = plan_placement(r, g);
  EXPECT_NEAR(p.spine_gpu_s, 3.0 / 1000, 1e-9);
  EXPECT_NEAR(p.spine_cpu_s, 5.5 / 50, 1e-9);
  EXPECT_NEAR(p.step_s, p.spine_gpu_s + p.spine_cpu_s + p.spine_stream_s + p.expert_s + p.crossing_s + p.state_s, 1e-12);
  // The comparisons: every piece on the CPU; the pieces off the GPU over the bus.
  EXPECT_NEAR(p.all_cpu_s, 8.5 / 50 + 32 * 0.01 / 10, 1e-9);
  EXPECT_GT(p.upload_per_call_s, p.step_s);  // 25 GB/s bus against a 50 GB/s CPU
  EXPECT_LT(p.step_s, p.all_cpu_s);
  // More VRAM is never slower.
  r.vram = 9 * GB;
  EXPECT_LE(plan_placement(r, g).step_s, p.step_s);
  // KDA states handed back each token: down the bus, then copied by the CPU.
  r.vram = 5 * GB;
  r.state_sync = GB / 10;
  const Placement kda = plan_placement(r, g);
  EXPECT_NEAR(kda.state_s, 0.1 / 25 + 0.1 / 50, 1e-9);
  EXPECT_NEAR(kda.step_s, p.step_s + kda.state_s, 1e-12);
  EXPECT_NEAR(kda.upload_per_call_s, p.upload_per_call_s + kda.state_s, 1e-12);
  EXPECT_NE(describe_projection(kda).find("KDA states back 0.0060 s"), std::string::npos) << describe_projection(kda);
}

TEST(Placement, UploadSpillIsTheOldWay) {
  PlacementRequest r = four_layers();
  with_arena(r);  // room for a 1 GB piece off the GPU: the spine placed as with 4 GB
  r.upload_spill = true;
  const Placement p = plan_placement(r, rates());
  EXPECT_NEAR(p.step_s, p.upload_per_call_s, 1e-9);
  EXPECT_NE(describe_placement(p, 4).find("uploaded per call"), std::string::npos);
  // The spine's RAM is pageable: its per-call uploads go through the staging at
  // the slower of a one-thread copy and the bus; experts (pinned) at the bus's.
  GpuRates g = rates();
  g.staging_gbps = 10;
  const Placement staged = plan_placement(r, g);
  EXPECT_NEAR(staged.spine_cpu_s, 5.5 / 10 + 5.5 / 1000, 1e-9);
  EXPECT_NEAR(staged.expert_s, p.expert_s, 1e-12);
  g.staging_gbps = 100;  // a copy faster than the bus: the bus decides
  EXPECT_NEAR(plan_placement(r, g).spine_cpu_s, p.spine_cpu_s, 1e-12);
}

// Split: the CPU's and the bus's rates add on the RAM pieces off the GPU
// (50 GB/s CPU + the bus and GEMV in series, 25 and 1000 GB/s); the GPU's
// share is its rate's part; streamed pieces (not pinned) stay the CPU's.
TEST(Placement, SplitSpillAddsTheBusToTheCpu) {
  PlacementRequest r = four_layers();
  with_arena(r);  // room for a 1 GB piece off the GPU: the spine placed as with 4 GB
  r.split_spill = true;
  r.pieces.push_back({GB, 8, false});  // a streamed piece
  GpuRates g = rates();
  g.disk_gbps = 1000;  // the ring's pieces at the CPU's rate
  const Placement p = plan_placement(r, g);
  const double bus = 1.0 / (1.0 / 25 + 1.0 / 1000);  // GB/s, upload then GEMV
  EXPECT_NEAR(p.gpu_share, bus / (bus + 50), 1e-9);
  EXPECT_NEAR(p.spine_cpu_s, 5.5 / (50 + bus), 1e-9);
  EXPECT_NEAR(p.spine_stream_s, 1.0 / 50, 1e-9);
  r.split_spill = false;
  const Placement cpu_only = plan_placement(r, g);
  EXPECT_LT(p.step_s, cpu_only.step_s);
  EXPECT_NEAR(cpu_only.spine_cpu_s - p.spine_cpu_s, 5.5 / 50 - 5.5 / (50 + bus), 1e-9);
  const std::string s = describe_placement(p, 4);
  EXPECT_NE(s.find("(split: 33 % of their rows by the GPU"), std::string::npos) << s;
  // Unknown rates: a share measured at run time, said so.
  const Placement unknown = plan_placement((r.split_spill = true, r), GpuRates{});
  EXPECT_EQ(unknown.gpu_share, 0.0);
  EXPECT_NE(describe_placement(unknown, 4).find("a share of their rows"), std::string::npos);
}

// Split runs the DMA and the CPU's matvec at once: each at the part of its
// rate it keeps beside the other (measured, or the H100 box's figures).
TEST(Placement, SplitSharesTheHostsMemory) {
  PlacementRequest r = four_layers();
  with_arena(r);
  r.split_spill = true;
  GpuRates g = rates();
  g.split_cpu_keeps = 0.8, g.split_bus_keeps = 0.5;
  const Placement p = plan_placement(r, g);
  const double bus = 1.0 / (1.0 / (25 * 0.5) + 1.0 / 1000), cpu = 50 * 0.8;
  EXPECT_NEAR(p.gpu_share, bus / (bus + cpu), 1e-9);
  EXPECT_NEAR(p.spine_cpu_s, 5.5 / (cpu + bus), 1e-9);
  g.split_cpu_keeps = g.split_bus_keeps = 0;  // unmeasured: slower than with neither slowing the other
  const Placement preset = plan_placement(r, g);
  EXPECT_GT(preset.spine_cpu_s, 5.5 / (50 + 1.0 / (1.0 / 25 + 1.0 / 1000)));
  EXPECT_LT(preset.spine_cpu_s, 5.5 / 50);
}

// Uploading per call, a weight off the GPU larger than the scratch arena can
// hold is computed by the CPU (the CUDA entry cannot stage it): a big head
// beside small layers on a small card. Split takes it in blocks.
TEST(Placement, PiecesTooBigForTheArenaStayOnTheCpu) {
  PlacementRequest r = four_layers();
  with_arena(r);
  r.pieces.back().bytes = 2 * GB;  // the head: larger than the 1 GB arena
  r.upload_spill = true;
  GpuRates g = rates();
  g.staging_gbps = 10;
  const Placement up = plan_placement(r, g);
  EXPECT_NEAR(up.spine_cpu_s, 5.0 * (1.0 / 10 + 1.0 / 1000) + 2.0 / 50, 1e-9);
  EXPECT_NEAR(up.upload_per_call_s, up.step_s, 1e-12);
  r.upload_spill = false, r.split_spill = true;
  const Placement split = plan_placement(r, g);
  const double bus = 1.0 / (1.0 / 25 + 1.0 / 1000);
  EXPECT_NEAR(split.spine_cpu_s, 7.0 / (50 + bus), 1e-9);
  r.scratch = 0;  // only the base scratch: every 1 GB piece on the CPU, uploading or not
  r.split_spill = false, r.upload_spill = true;
  const Placement none = plan_placement(r, g);
  EXPECT_NEAR(none.spine_cpu_s, double(none.spine_cpu) / 50e9, 1e-9);
}

TEST(Placement, SpillFollowsTheRatesUnlessForced) {
  PlacementRequest r = four_layers();
  with_arena(r);            // room to upload a piece (else uploading projects as the CPU)
  r.spill_by_rates = true;  // resident_spine 0: split is no candidate (nothing may be pinned)
  GpuRates g = rates();  // a 50 GB/s CPU against a 25 GB/s bus: the CPU
  EXPECT_FALSE(plan_placement(r, g).upload_spill);
  g.cpu_gbps = 10;  // a slow CPU: the bus
  const Placement p = plan_placement(r, g);
  EXPECT_TRUE(p.upload_spill);
  EXPECT_FALSE(p.split_spill);
  EXPECT_NEAR(p.step_s, p.upload_per_call_s, 1e-9);
  r.spill_by_rates = false;
  EXPECT_FALSE(plan_placement(r, g).upload_spill);
}

// Neither forced, split is taken where it projects a step at least a tenth
// faster than the better of the other two and RAM holds the page lists of
// the spine it pins; forced spills stay as given.
TEST(Placement, SplitIsChosenByTheRatesWhereThePinFits) {
  PlacementRequest r = four_layers();
  with_arena(r);
  r.spill_by_rates = true;
  r.resident_spine = 8500 * (GB / 1000);
  const GpuRates g = rates();  // CPU 50, bus 25: split adds a third to the CPU
  const Placement p = plan_placement(r, g);
  EXPECT_TRUE(p.split_spill);
  EXPECT_FALSE(p.upload_spill);
  r.split_spill = true, r.spill_by_rates = false;
  EXPECT_NEAR(p.step_s, plan_placement(r, g).step_s, 1e-12);  // the same as asked for
  r.split_spill = false, r.spill_by_rates = true;
  r.host_room = split_pin_overhead(r.resident_spine) - 1;  // no room for the page lists: the CPU
  EXPECT_FALSE(plan_placement(r, g).split_spill);
  r.host_room = UINT64_MAX;
  GpuRates slow_bus = g;
  slow_bus.pcie_gbps = 2;  // split gains under a tenth: not worth the pin
  EXPECT_FALSE(plan_placement(r, slow_bus).split_spill);
  r.spill_by_rates = false;  // --gpu-spill cpu
  EXPECT_FALSE(plan_placement(r, g).split_spill);
  EXPECT_GT(split_pin_overhead(r.resident_spine), 0u);
}

TEST(Placement, DescriptionNamesBothSides) {
  PlacementRequest r = four_layers();
  r.vram = 4 * GB;
  const Placement p = plan_placement(r, rates());
  const std::string s = describe_placement(p, 4);
  EXPECT_NE(s.find("on the GPU: layer 0 of 4"), std::string::npos) << s;
  EXPECT_NE(s.find("the CPU computes: layers 1-3 and the head"), std::string::npos) << s;
  EXPECT_NE(describe_projection(p).find("s/token"), std::string::npos);
}

// K3's request: a matrix resident whole is multiplied in one call (one
// mirror, one upload into the arena), so it is one piece however many read
// pieces it was cut into; a matrix partly streamed keeps its pieces.
TEST(Placement, K3MatricesResidentWholeAreOnePiece) {
  const Checkpoint ck = layout_checkpoint(k3_config(), "Kimi K3");
  const Spine spine(ck, 64ull << 20);
  ModelOptions o;
  o.ram_budget = 512ull << 30;
  const PlacementRequest all = placement_request(ck, spine, plan_memory(ck, spine, o));
  const uint64_t head = 163840ull * 7168 * 2;
  ASSERT_FALSE(all.pieces.empty());
  EXPECT_GE(all.pieces.back().bytes, head);  // the head, one call
  EXPECT_LT(all.pieces.back().bytes, head + (1 << 20));
  EXPECT_EQ(all.pieces.back().unit, 2 * all.layers);
  uint64_t all_bytes = 0;
  for (const PlacedPiece& q : all.pieces) all_bytes += q.bytes;
  o.ram_budget = 64ull << 30;  // part of the spine streams
  const PlacementRequest part = placement_request(ck, spine, plan_memory(ck, spine, o));
  EXPECT_GT(part.pieces.size(), all.pieces.size());
  uint64_t part_bytes = 0;
  for (const PlacedPiece& q : part.pieces) {
    part_bytes += q.bytes;
    if (!q.in_ram) {
      EXPECT_LE(q.bytes, (64ull << 20) + (1 << 20));  // a streamed piece: one read piece
    }
  }
  EXPECT_EQ(part_bytes, all_bytes);  // the same bytes, cut where they are read
}

}  // namespace
}  // namespace sluice
