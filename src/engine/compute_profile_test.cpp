// engine/compute_profile: the engine's measured compute kept for `sluice plan`:
// saved and read back (the latest runs only), a bad file never stops anything,
// and the scaling to another step's bytes.
#include "engine/compute_profile.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/error.h"
#include "io/test_util.h"

namespace sluice {
namespace {

using testing::ScratchDir;

ComputeProfile run(double s, int threads = 2) {
  ComputeProfile p;
  p.model = "/m";
  p.threads = threads;
  p.steps = 5;
  p.compute_s = s;
  p.mix.bf16 = 8e9;
  p.mix.mxfp4 = 1e9;
  return p;
}

kernels::KernelRates rates() {
  kernels::KernelRates r;
  r.bf16_gbps = 20, r.int8_gbps = 40, r.mxfp4_gbps = 10, r.decode_gbps = 5;
  return r;
}

TEST(ComputeProfile, SavedRunsReadBackTheLatestKept) {
  ScratchDir dir;
  const std::string path = dir.path + "/sub/compute.json";
  EXPECT_TRUE(load_compute_profile(path).empty());
  for (int i = 1; i <= kComputeRunsKept + 2; i++) save_compute_profile(path, run(0.1 * i));
  const std::vector<ComputeProfile> runs = load_compute_profile(path);
  ASSERT_EQ(runs.size(), size_t(kComputeRunsKept));
  EXPECT_DOUBLE_EQ(runs.front().compute_s, 0.3);  // the two oldest dropped
  EXPECT_DOUBLE_EQ(runs.back().compute_s, 0.1 * (kComputeRunsKept + 2));
  EXPECT_EQ(runs.back().threads, 2);
  EXPECT_EQ(runs.back().model, "/m");
  EXPECT_DOUBLE_EQ(runs.back().mix.bf16, 8e9);
  EXPECT_FALSE(runs.back().when.empty());
  EXPECT_THROW(save_compute_profile(path, run(0)), Error);  // nothing measured
}

TEST(ComputeProfile, ABadFileIsNoProfile) {
  ScratchDir dir;
  const std::string path = dir.path + "/compute.json";
  std::ofstream(path) << "{not json";
  EXPECT_TRUE(load_compute_profile(path).empty());
  std::ofstream(path) << R"({"runs": [{"compute_s_per_token": 0.3, "threads": 2},
      {"compute_s_per_token": -1, "threads": 2, "bytes": {"bf16": 1, "int8": 0, "mxfp4": 0, "decoded": 0}},
      {"compute_s_per_token": 0.4, "threads": 2, "bytes": {"bf16": 1, "int8": 0, "mxfp4": 0, "decoded": 0}}]})";
  const std::vector<ComputeProfile> runs = load_compute_profile(path);
  ASSERT_EQ(runs.size(), 1u);  // no bytes; a negative time: left out
  EXPECT_DOUBLE_EQ(runs[0].compute_s, 0.4);
  EXPECT_EQ(runs[0].kernels, "avx2");  // saved before runs said which kernels ran: all were AVX2
  save_compute_profile(path, run(0.5));  // an incomplete run is not carried on
  EXPECT_EQ(load_compute_profile(path).size(), 2u);
}

// A run of one set of kernels says nothing about another's compute (the AVX2
// and AVX-512 bodies differ 1.6-2.5x in prefill products): only runs of the
// kernels the plan's rates were measured with are used.
TEST(ComputeProfile, OnlyRunsOfTheSameKernelsAreUsed) {
  ScratchDir dir;
  const std::string path = dir.path + "/compute.json";
  ComputeProfile a = run(0.4), b = run(0.6);
  a.kernels = "avx2", b.kernels = "avx512";
  save_compute_profile(path, a);
  save_compute_profile(path, b);
  const std::vector<ComputeProfile> runs = load_compute_profile(path);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].kernels, "avx2");
  EXPECT_EQ(runs[1].kernels, "avx512");
  kernels::KernelRates r = rates();
  int used = -1;
  r.kernels = "avx512";
  EXPECT_DOUBLE_EQ(saved_compute_s(runs, 2, runs[0].mix, r, &used), 0.6);
  EXPECT_EQ(used, 1);
  r.kernels = "avx2";
  EXPECT_DOUBLE_EQ(saved_compute_s(runs, 2, runs[0].mix, r, &used), 0.4);
  r.kernels = "scalar";
  EXPECT_EQ(saved_compute_s(runs, 2, runs[0].mix, r, &used), 0.0);
  EXPECT_EQ(used, 0);
  r.kernels.clear();  // rates that name no kernels: every run
  const double both = saved_compute_s(runs, 2, runs[0].mix, r, &used);
  EXPECT_EQ(used, 2);
  EXPECT_TRUE(both == 0.4 || both == 0.6) << both;  // the median of the two
}

TEST(ComputeProfile, ScalesByTheKernelsRelativeCost) {
  const kernels::KernelRates r = rates();
  const ComputeProfile p = run(0.5);
  EXPECT_DOUBLE_EQ(kernel_seconds(p.mix, r), 8e9 / 20e9 + 1e9 / 10e9);
  EXPECT_DOUBLE_EQ(kernel_seconds(p.mix, r, 2), (8e9 / 20e9 + 1e9 / 10e9) / 2);
  EXPECT_DOUBLE_EQ(scaled_compute_s(p, p.mix, r), 0.5);  // the same step: the measurement itself
  StepMix twice = p.mix;
  twice.bf16 *= 2, twice.mxfp4 *= 2;
  EXPECT_DOUBLE_EQ(scaled_compute_s(p, twice, r), 1.0);
  // The same bf16 bytes as int8 rows at twice the rate: the bf16 part halves.
  StepMix int8 = p.mix;
  int8.int8 = int8.bf16, int8.bf16 = 0;
  EXPECT_DOUBLE_EQ(scaled_compute_s(p, int8, r), 0.5 * (0.2 + 0.1) / 0.5);
  // Level-free: every rate twice as fast gives the same answer.
  kernels::KernelRates fast = r;
  fast.bf16_gbps *= 2, fast.int8_gbps *= 2, fast.mxfp4_gbps *= 2, fast.decode_gbps *= 2;
  EXPECT_DOUBLE_EQ(scaled_compute_s(p, twice, fast), 1.0);
}

TEST(ComputeProfile, MedianOfTheRunsWithTheSameThreads) {
  const kernels::KernelRates r = rates();
  const std::vector<ComputeProfile> runs = {run(0.45), run(0.36), run(0.9, 1), run(0.34)};
  int used = 0;
  EXPECT_DOUBLE_EQ(saved_compute_s(runs, 2, runs[0].mix, r, &used), 0.36);
  EXPECT_EQ(used, 3);
  EXPECT_DOUBLE_EQ(saved_compute_s(runs, 1, runs[0].mix, r, &used), 0.9);
  EXPECT_EQ(used, 1);
  EXPECT_EQ(saved_compute_s(runs, 4, runs[0].mix, r, &used), 0.0);
  EXPECT_EQ(used, 0);
}

// The token boundary rides along when measured, is scaled by its own bytes,
// and runs without one (older files) give no boundary.
TEST(ComputeProfile, TheTokenBoundaryIsKeptAndScaledByItsOwnBytes) {
  ScratchDir dir;
  const std::string path = dir.path + "/compute.json";
  const kernels::KernelRates r = rates();
  ComputeProfile with = run(0.4);
  with.boundary_s = 0.2;
  with.boundary_mix.bf16 = 4e9;
  save_compute_profile(path, run(0.5));  // no boundary measured
  save_compute_profile(path, with);
  const std::vector<ComputeProfile> runs = load_compute_profile(path);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].boundary_s, 0.0);
  EXPECT_DOUBLE_EQ(runs[1].boundary_s, 0.2);
  EXPECT_DOUBLE_EQ(runs[1].boundary_mix.bf16, 4e9);
  int used = 0;
  EXPECT_DOUBLE_EQ(saved_boundary_s(runs, 2, with.boundary_mix, r, &used), 0.2);
  EXPECT_EQ(used, 1);  // the run without one is not counted
  StepMix half;
  half.bf16 = 2e9;
  EXPECT_DOUBLE_EQ(saved_boundary_s(runs, 2, half, r), 0.1);
  EXPECT_EQ(saved_boundary_s(runs, 1, half, r, &used), 0.0);
  EXPECT_EQ(used, 0);
  // A boundary longer than the compute it is part of is cut to it.
  std::ofstream(path) << R"({"runs": [{"compute_s_per_token": 0.3, "threads": 2,
      "bytes": {"bf16": 1, "int8": 0, "mxfp4": 0, "decoded": 0}, "boundary_s_per_token": 0.5,
      "boundary_bytes": {"bf16": 1, "int8": 0, "mxfp4": 0, "decoded": 0}}]})";
  ASSERT_EQ(load_compute_profile(path).size(), 1u);
  EXPECT_DOUBLE_EQ(load_compute_profile(path)[0].boundary_s, 0.3);
}

}  // namespace
}  // namespace sluice
