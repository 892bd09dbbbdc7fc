// --device: the names, the errors, and (with a CUDA build on a GPU) the CUDA
// entry's weight mirrors. The CUDA entry's ops against scalar are
// backend_test.cpp's Device/BackendOps.* (skipped without a GPU).
#include "kernels/device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/numeric.h"

namespace sluice {
namespace {

TEST(DeviceBackend, CpuIsTheCpuEntry) {
  EXPECT_EQ(&device_backend("cpu"), &cpu_backend());
  EXPECT_EQ(describe_backend(cpu_backend()).rfind("cpu (", 0), 0u);
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

// A stable weight (owner != 0) is mirrored once and gives the bits of the
// same weight uploaded per call (owner 0); release() drops the mirror, and
// new bytes at the same address under a new owner are read afresh.
TEST(DeviceBackend, CudaMirrorsStableWeights) {
  const Backend* be = nullptr;
  try {
    be = &device_backend("cuda");
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
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

}  // namespace
}  // namespace sluice
