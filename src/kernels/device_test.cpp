// --device: the names, the errors, and (with a CUDA build on a GPU) the CUDA
// entry's weight mirrors. The CUDA entry's ops against scalar are
// backend_test.cpp's Device/BackendOps.* (skipped without a GPU).
#include "kernels/device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/numeric.h"
#include "kernels/ref.h"

namespace sluice {
namespace {

TEST(DeviceBackend, CpuIsTheCpuEntry) {
  EXPECT_EQ(&device_backend("cpu"), &cpu_backend());
  EXPECT_EQ(describe_backend(cpu_backend()).rfind("cpu (", 0), 0u);
}

// Reports (serve's device, expert stats) name the CPU entries as they did when
// the AVX-512 bodies ran under the avx2 entry.
TEST(DeviceBackend, CpuEntriesAreDescribedAsBefore) {
  EXPECT_EQ(describe_backend(scalar_backend()), "cpu (scalar)");
  if (const Backend* b = avx2_backend()) {
    EXPECT_EQ(describe_backend(*b), "cpu (avx2)");
  }
  if (const Backend* b = avx512_backend()) {
    EXPECT_EQ(describe_backend(*b), "cpu (avx2, avx512 kernels)");
  }
}

TEST(DeviceBackend, UnknownNameIsAnError) {
  try {
    device_backend("tpu");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--device: unknown device 'tpu' (cpu, cuda or auto)");
  }
}

TEST(DeviceBackend, CudaUnavailableIsAClearErrorAndAutoFallsBack) {
  std::string why;
  try {
    const Backend& b = device_backend("cuda");
    EXPECT_STREQ(b.name, "cuda");
    EXPECT_EQ(&device_backend("auto"), &b);
    EXPECT_TRUE(cuda_built());
    return;
  } catch (const Error& e) {
    why = e.what();
  }
  EXPECT_EQ(why.rfind("--device cuda: ", 0), 0u) << why;
  if (!cuda_built()) {
    EXPECT_NE(why.find("-DSLUICE_CUDA=ON"), std::string::npos) << why;
  }
  EXPECT_EQ(&device_backend("auto"), &cpu_backend());
}

// The CUDA entry, or null with *why set (no CUDA build or no GPU: the test skips).
const Backend* cuda_or_null(std::string* why) {
  try {
    return &device_backend("cuda");
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

// A stable weight (owner != 0) is mirrored once and gives the bits of the
// same weight uploaded per call (owner 0); release() drops the mirror, and
// new bytes at the same address under a new owner are read afresh.
TEST(DeviceBackend, CudaMirrorsStableWeights) {
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int rows = 37, cols = 300;
  std::vector<uint16_t> w(size_t(rows) * cols);
  std::vector<float> x(cols), y0(rows), y1(rows), y2(rows), y3(rows);
  for (auto& v : w) v = f32_to_bf16(d(rng));
  for (auto& v : x) v = d(rng);
  const WeightOwner owner = next_weight_owner();
  be->matvec_bf16(Bf16Ref{w.data(), rows, cols, 0}, x.data(), y0.data());
  be->matvec_bf16(Bf16Ref{w.data(), rows, cols, owner}, x.data(), y1.data());
  be->matvec_bf16(Bf16Ref{w.data(), rows, cols, owner}, x.data(), y2.data());
  EXPECT_EQ(0, std::memcmp(y0.data(), y1.data(), sizeof(float) * rows));
  EXPECT_EQ(0, std::memcmp(y0.data(), y2.data(), sizeof(float) * rows));
  be->release(owner);
  for (auto& v : w) v = f32_to_bf16(d(rng));
  const WeightOwner owner2 = next_weight_owner();
  be->matvec_bf16(Bf16Ref{w.data(), rows, cols, owner2}, x.data(), y3.data());
  std::vector<float> want(rows);
  be->matvec_bf16(Bf16Ref{w.data(), rows, cols, 0}, x.data(), want.data());
  EXPECT_EQ(0, std::memcmp(want.data(), y3.data(), sizeof(float) * rows));
  EXPECT_NE(0, std::memcmp(y0.data(), y3.data(), sizeof(float) * rows));
  be->release(owner2);
}

// The rates a run's placement decides with: every one measured and positive,
// the pinned DMA at least as fast as the staged one, each side slower (or no
// faster) beside the other; no room on the card or in RAM for the probe:
// none measured; the CPU entries measure nothing. What the card held before,
// it holds after.
TEST(DeviceBackend, CudaBusRatesAreMeasuredWithinTheRoomGiven) {
  const uint64_t ram = kBusRatesMinHostBytes;
  EXPECT_FALSE(measure_bus_rates(cpu_backend(), uint64_t(1) << 40, ram).measured);
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  EXPECT_FALSE(measure_bus_rates(*be, uint64_t(64) << 20, ram).measured);
  EXPECT_FALSE(measure_bus_rates(*be, uint64_t(1) << 30, ram - 1).measured);
  const uint64_t before = vram_now(*be).used;
  const BusRates r = measure_bus_rates(*be, uint64_t(1) << 30, ram);
  ASSERT_TRUE(r.measured);
  EXPECT_GT(r.gemv_gbs, 0);
  EXPECT_GT(r.staged_gbs, 0);
  EXPECT_GT(r.cpu_gbs, 0);
  EXPECT_GT(r.call_s, 0);
  EXPECT_LT(r.call_s, 0.01);
  EXPECT_GT(r.pinned_gbs, 0.8 * r.staged_gbs);  // noise aside, pinned skips the staging copy
  EXPECT_GT(r.cpu_beside_dma_gbs, 0);
  EXPECT_GT(r.dma_beside_cpu_gbs, 0);
  EXPECT_LT(r.dma_beside_cpu_gbs, 1.2 * r.pinned_gbs);
  EXPECT_LE(vram_now(*be).used, before + (uint64_t(8) << 20));
}

// Under a VRAM budget (VramLimits, issue 37) a stable weight the spine cap
// leaves off the GPU is computed by the CPU entry (its bits exactly), or
// uploaded per call with cpu_spill off; what is in use stays in the budget.
TEST(DeviceBackend, CudaVramLimitsSpillToTheCpu) {
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  std::mt19937_64 rng(21);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int rows = 64, cols = 512;
  std::vector<uint16_t> w(size_t(rows) * cols);
  std::vector<float> x(cols), y(rows), want(rows);
  for (auto& v : w) v = f32_to_bf16(d(rng));
  for (auto& v : x) v = d(rng);
  const WeightOwner owner = next_weight_owner();
  const Bf16Ref W{w.data(), rows, cols, owner};
  cpu_backend().matvec_bf16(W, x.data(), want.data());
  VramLimits l;
  l.budget = int64_t(vram_now(*be).used + (uint64_t(256) << 20));
  l.spine = 0, l.scratch = int64_t(64) << 20, l.cpu_spill = true;
  set_vram_limits(l);
  const DeviceReport r0 = device_report(*be, false);
  be->matvec_bf16(W, x.data(), y.data());
  const DeviceReport r1 = device_report(*be, false);
  EXPECT_EQ(0, std::memcmp(y.data(), want.data(), sizeof(float) * rows));
  EXPECT_EQ(r1.cpu_spill_calls, r0.cpu_spill_calls + 1);
  EXPECT_EQ(r1.resident_bytes, r0.resident_bytes);  // not mirrored
  l.cpu_spill = false;  // the old way: uploaded for the call
  set_vram_limits(l);
  be->matvec_bf16(W, x.data(), y.data());
  const DeviceReport r2 = device_report(*be, false);
  EXPECT_EQ(r2.cpu_spill_calls, r1.cpu_spill_calls);
  EXPECT_GE(r2.uploaded_bytes, r1.uploaded_bytes + w.size() * 2);
  EXPECT_LE(vram_now(*be).used, uint64_t(l.budget));
  set_vram_limits(VramLimits{});
  be->release(owner);
}

// A split product's k tokens of `rows` outputs: the CPU's rows, [gpu_rows,
// rows), bitwise the CPU entry's (`want`); the GPU's within its contract.
void expect_split_rows(const std::vector<float>& want, const std::vector<float>& y, int k, int rows, int gpu_rows,
                       const char* what) {
  for (int t = 0; t < k; t++)
    for (int i = 0; i < rows; i++) {
      const float a = want[size_t(t) * rows + i], b = y[size_t(t) * rows + i];
      if (i >= gpu_rows)
        ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << what << " row " << i << " of token " << t;
      else
        ASSERT_NEAR(a, b, 1e-3f * (1 + std::fabs(a))) << what << " row " << i << " of token " << t;
    }
}

// --gpu-spill split (VramLimits::split_spill): a weight off the GPU in pinned
// memory is computed by both, the GPU's rows over the bus, the CPU's in place:
// the CPU's rows are the CPU entry's bits, the GPU's within the products'
// noise, one row or several; unpinned, the CPU alone; with the share measured,
// the first calls probe and the share kept is in (0, 0.75].
TEST(DeviceBackend, CudaSplitSpillSharesTheRows) {
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  std::mt19937_64 rng(23);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int rows = 200, cols = 512, n = 3;
  std::vector<uint16_t> w(size_t(rows) * cols);
  std::vector<float> x(size_t(n) * cols), want(size_t(n) * rows);
  for (auto& v : w) v = f32_to_bf16(d(rng));
  for (auto& v : x) v = d(rng);
  const WeightOwner owner = next_weight_owner();
  const Bf16Ref W{w.data(), rows, cols, owner};
  cpu_backend().matmul_bf16(W, x.data(), n, want.data());
  VramLimits l;
  l.budget = int64_t(vram_now(*be).used + (uint64_t(256) << 20));
  l.spine = 0, l.scratch = int64_t(64) << 20, l.cpu_spill = true, l.split_spill = true, l.gpu_share = 0.3;
  set_vram_limits(l);
  auto check = [&](int k, const char* what) {
    std::vector<float> y(size_t(k) * rows, NAN);
    be->matmul_bf16(W, x.data(), k, y.data());
    expect_split_rows(want, y, k, rows, 48, what);  // 0.3 of 200 rows, down to 16-row steps
  };
  const DeviceReport r0 = device_report(*be, false);
  check(1, "unpinned");
  const DeviceReport r1 = device_report(*be, false);
  EXPECT_EQ(r1.split_calls, r0.split_calls);  // not pinned: the CPU alone
  EXPECT_EQ(r1.cpu_spill_calls, r0.cpu_spill_calls + 1);
  be->register_host(w.data(), w.size() * 2);
  check(1, "one row");
  check(n, "three rows");
  const DeviceReport r2 = device_report(*be, false);
  EXPECT_EQ(r2.split_calls, r1.split_calls + 2);
  EXPECT_NEAR(r2.split_share, 0.3, 1e-12);
  EXPECT_LE(vram_now(*be).used, uint64_t(l.budget));
  l.gpu_share = 0;  // measured on one-row calls (decode's), then a share kept
  set_vram_limits(l);
  std::vector<float> y(size_t(n) * rows);
  for (int i = 0; i < 40; i++) be->matmul_bf16(W, x.data(), n, y.data());
  EXPECT_EQ(device_report(*be, false).split_share, 0.25);  // several rows: not timed, the probe's share
  for (int i = 0; i < 30; i++) be->matmul_bf16(W, x.data(), 1, y.data());
  const double share = device_report(*be, false).split_share;
  EXPECT_GT(share, 0.0);
  EXPECT_LE(share, 0.75);
  be->matmul_bf16(W, x.data(), n, y.data());
  for (int t = 0; t < n; t++)
    for (int i = 0; i < rows; i++)
      ASSERT_NEAR(want[size_t(t) * rows + i], y[size_t(t) * rows + i], 1e-3f * (1 + std::fabs(want[size_t(t) * rows + i])));
  be->unregister_host(w.data(), w.size() * 2);
  set_vram_limits(VramLimits{});
  be->release(owner);
}

// Split with a GPU share larger than the scratch: its rows go through the
// arena in blocks (two buffers taking turns), exact as one block.
TEST(DeviceBackend, CudaSplitSpillStreamsALargeShareInBlocks) {
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  std::mt19937_64 rng(29);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int rows = 4096, cols = 1024;  // 8 MiB; the GPU's half, 4 MiB, in 1 MiB scratch: blocks of 240 rows
  std::vector<uint16_t> w(size_t(rows) * cols);
  std::vector<float> x(size_t(2) * cols), want(size_t(2) * rows);
  for (auto& v : w) v = f32_to_bf16(d(rng));
  for (auto& v : x) v = d(rng);
  const WeightOwner owner = next_weight_owner();
  const Bf16Ref W{w.data(), rows, cols, owner};
  cpu_backend().matmul_bf16(W, x.data(), 2, want.data());
  be->register_host(w.data(), w.size() * 2);
  VramLimits l;
  l.budget = int64_t(vram_now(*be).used + (uint64_t(256) << 20));
  l.spine = 0, l.scratch = int64_t(1) << 20, l.cpu_spill = true, l.split_spill = true, l.gpu_share = 0.5;
  set_vram_limits(l);
  for (int k : {1, 2}) {
    std::vector<float> y(size_t(k) * rows, NAN);
    const DeviceReport r0 = device_report(*be, false);
    be->matmul_bf16(W, x.data(), k, y.data());
    const DeviceReport r1 = device_report(*be, false);
    EXPECT_EQ(r1.split_calls, r0.split_calls + 1);
    EXPECT_GE(r1.uploaded_pinned_bytes, r0.uploaded_pinned_bytes + w.size());  // the GPU's half, over the bus
    expect_split_rows(want, y, k, rows, rows / 2, "in blocks");
  }
  be->unregister_host(w.data(), w.size() * 2);
  set_vram_limits(VramLimits{});
  be->release(owner);
}

// Under --vram the arena (a split's blocks here) grows only into what the
// placement left it: the tier still gets all of its budget afterwards, the
// arena's bytes not counted twice, and what is in use stays within --vram.
TEST(DeviceBackend, CudaArenaLeavesTheTierItsBudget) {
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  std::mt19937_64 rng(31);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int rows = 4096, cols = 2048;  // 16 MiB of bf16: the GPU's half in 4 MiB of scratch, in blocks
  std::vector<uint16_t> w(size_t(rows) * cols);
  std::vector<float> x(cols), y(rows);
  for (auto& v : w) v = f32_to_bf16(d(rng));
  for (auto& v : x) v = d(rng);
  const WeightOwner owner = next_weight_owner();
  be->register_host(w.data(), w.size() * 2);
  const int64_t tier = int64_t(16) << 20, scratch = int64_t(4) << 20;
  VramLimits l;
  l.budget = int64_t(vram_now(*be).used) + tier + scratch;
  l.spine = 0, l.scratch = scratch, l.cpu_spill = true, l.split_spill = true, l.gpu_share = 0.5;
  set_vram_limits(l);
  set_vram_expert_budget(tier);
  be->matvec_bf16(Bf16Ref{w.data(), rows, cols, owner}, x.data(), y.data());
  // Experts of 64 x 2048 (64 KiB + 4 KiB): more than the tier holds, each once.
  const int er = 64, ec = 2048;
  const size_t packed = size_t(er) * ec / 2, scale = size_t(er) * ec / 32, span = packed + scale;
  const int experts = int(size_t(tier) / span) + 8;
  std::vector<uint8_t> bytes(span);
  for (size_t i = 0; i < packed; i++) bytes[i] = uint8_t(rng());
  for (size_t i = 0; i < scale; i++) bytes[packed + i] = uint8_t(120 + rng() % 12);
  std::vector<float> ex(ec, 0.5f), ey(er);
  for (int e = 0; e < experts; e++) {
    const Mxfp4Task t{{bytes.data(), bytes.data() + packed, er, ec, 0, content_key(owner, uint32_t(e) + 1)}, ex.data(),
                      ey.data(), 1};
    be->grouped_mxfp4(&t, 1);
  }
  const DeviceReport r = device_report(*be, false);
  EXPECT_GE(r.tier_bytes + 2 * ((span + 4095) / 4096 * 4096), uint64_t(tier));  // the budget, to a slot or two
  EXPECT_LE(vram_now(*be).used, uint64_t(l.budget));
  be->unregister_host(w.data(), w.size() * 2);
  be->release(owner);
  set_vram_limits(VramLimits{});
  set_vram_expert_budget(-1);
}

// The VRAM expert tier (content-keyed MXFP4 weights, owner 0): the bits of
// the same products without a key, whether the tier is off, holds two
// entries (every round evicts) or grows freely (the second round hits), and
// when a key's bytes come from another host address (a RAM cache slot moved)
// or from pinned (registered) memory. At 64×256 (the row kernels) and 40×1024
// (fragment order: the tier's copies permuted, rows padded to 64).
void check_expert_tier(const Backend* be, int rows, int cols) {
  SCOPED_TRACE(testing::Message() << rows << "x" << cols);
  std::mt19937_64 rng(11);
  const int experts = 4;
  const size_t packed = size_t(rows) * cols / 2, scale = size_t(rows) * cols / 32, span = packed + scale;
  std::vector<uint8_t> bytes(span * experts);
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = uint8_t(rng());
  for (int e = 0; e < experts; e++)  // scales near 2^0: finite products
    for (size_t i = 0; i < scale; i++) bytes[size_t(e) * span + packed + i] = uint8_t(120 + rng() % 12);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(size_t(2) * cols);
  for (auto& v : x) v = d(rng);
  const WeightOwner owner = next_weight_owner();
  // Expert e's product from `base` (bytes laid out as `bytes`), keyed or not.
  auto product = [&](const uint8_t* base, int e, bool keyed, int n) {
    std::vector<float> y(size_t(n) * rows);
    const uint8_t* p = base + size_t(e) * span;
    const Mxfp4Task t{{p, p + packed, rows, cols, 0, keyed ? content_key(owner, uint32_t(e) + 1) : 0}, x.data(), y.data(),
                      n};
    be->grouped_mxfp4(&t, 1);
    return y;
  };
  std::vector<std::vector<float>> want;
  for (int e = 0; e < experts; e++) want.push_back(product(bytes.data(), e, false, 2));
  const size_t slot = (span + 255) / 256 * 256;
  for (const int64_t budget : {int64_t(0), int64_t(2 * slot), int64_t(-1)}) {
    set_vram_expert_budget(budget);
    const DeviceReport r0 = device_report(*be, false);
    for (int round = 0; round < 3; round++)
      for (int e = 0; e < experts; e++)
        EXPECT_EQ(product(bytes.data(), e, true, 2), want[size_t(e)]) << budget << " " << round << " " << e;
    const DeviceReport r1 = device_report(*be, false);
    if (budget == 0) {
      EXPECT_EQ(r1.tier_misses, r0.tier_misses);
    } else if (budget > 0) {
      EXPECT_GE(r1.tier_evictions - r0.tier_evictions, uint64_t(3 * experts - 2));
    } else {
      EXPECT_EQ(r1.tier_hits - r0.tier_hits, uint64_t(2 * experts));
    }
  }
  // The same keys from another (pinned) copy: hits, same bits; then misses from it.
  std::vector<uint8_t> moved(bytes);
  be->register_host(moved.data(), moved.size());
  EXPECT_GE(device_report(*be, false).pinned_host_bytes, moved.size());
  for (int e = 0; e < experts; e++) EXPECT_EQ(product(moved.data(), e, true, 2), want[size_t(e)]);
  be->release(owner);  // drops the keys: read afresh, from the pinned copy
  const DeviceReport p0 = device_report(*be, false);
  for (int e = 0; e < experts; e++) EXPECT_EQ(product(moved.data(), e, true, 1), std::vector<float>(want[size_t(e)].begin(), want[size_t(e)].begin() + rows));
  const DeviceReport p1 = device_report(*be, false);
  EXPECT_EQ(p1.tier_misses - p0.tier_misses, uint64_t(experts));
  EXPECT_EQ(p1.uploaded_pinned_bytes - p0.uploaded_pinned_bytes, uint64_t(experts) * span);
  be->unregister_host(moved.data(), moved.size());
  be->release(owner);
  set_vram_expert_budget(-1);
}

TEST(DeviceBackend, CudaExpertTierGivesTheSameBits) {
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  ASSERT_NE(be->register_host, nullptr);
  check_expert_tier(be, 64, 256);
  check_expert_tier(be, 40, 1024);
}

// An MXFP4 matrix of a width the fragment-order kernel takes: mirrored
// (owner != 0: permuted once), uploaded per call (permuted per call) and
// through the tier give the same bits, within the kernels' bound of the CPU
// entry, for one token and several.
TEST(DeviceBackend, CudaFragmentOrderCopiesGiveTheSameBits) {
  std::string why;
  const Backend* be = cuda_or_null(&why);
  if (!be) GTEST_SKIP() << why;
  std::mt19937_64 rng(21);
  const int rows = 70, cols = 1152, n = 3;
  const size_t packed = size_t(rows) * cols / 2, scale = size_t(rows) * cols / 32;
  std::vector<uint8_t> p(packed), sc(scale);
  for (auto& v : p) v = uint8_t(rng());
  for (auto& v : sc) v = uint8_t(118 + rng() % 16);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(size_t(n) * cols);
  for (auto& v : x) v = d(rng);
  const WeightOwner owner = next_weight_owner();
  auto product = [&](WeightOwner o, uint64_t key, int tokens) {
    std::vector<float> y(size_t(tokens) * rows);
    const Mxfp4Task t{{p.data(), sc.data(), rows, cols, o, key}, x.data(), y.data(), tokens};
    be->grouped_mxfp4(&t, 1);
    return y;
  };
  const std::vector<float> uploaded = product(0, 0, n);
  EXPECT_EQ(product(owner, 0, n), uploaded);  // makes the mirror
  EXPECT_EQ(product(owner, 0, n), uploaded);  // uses it
  EXPECT_EQ(product(0, content_key(owner, 1), n), uploaded);  // a tier miss
  EXPECT_EQ(product(0, content_key(owner, 1), n), uploaded);  // a hit
  const std::vector<float> one = product(0, 0, 1);
  EXPECT_EQ(one, std::vector<float>(uploaded.begin(), uploaded.begin() + rows));
  std::vector<float> want(size_t(n) * rows);
  cpu_backend().matmul_mxfp4(Mxfp4Ref{p.data(), sc.data(), rows, cols, 0, 0}, x.data(), n, want.data());
  std::vector<float> w(cols);
  for (int r = 0; r < rows; r++) {  // the kernels' bound: 1e-5·Σ|w·x|
    ref::dequant_mxfp4_row(p.data(), sc.data(), cols, r, w.data());
    for (int t = 0; t < n; t++) {
      double abs_sum = 0;
      for (int c = 0; c < cols; c++) abs_sum += std::fabs(double(w[c]) * x[size_t(t) * cols + c]);
      const size_t i = size_t(t) * rows + r;
      EXPECT_LE(std::fabs(double(uploaded[i]) - want[i]), 1e-5 * abs_sum) << "row " << r << " token " << t;
    }
  }
  be->release(owner);
}

}  // namespace
}  // namespace sluice
