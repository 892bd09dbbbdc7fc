// sluice plan: the plan open_model would follow, and the I/O floor per token.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>

namespace {

std::string run(const std::string& args, int* rc) {
  const std::string cmd = std::string(SLUICE_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

double seconds_per_token(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("([0-9.]+) s/token"))) return -1;
  return std::stod(m[1]);
}

TEST(CliPlan, ResidentSpineReadsOnlyExpertsAndLessRamStreamsMore) {
  const std::string model = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";
  int rc = 0;
  const std::string big = run("plan --model " + model + " --ram 1G --disk-gbps 1 --spine bf16", &rc);
  EXPECT_EQ(rc, 0) << big;
  EXPECT_NE(big.find("(all of it)"), std::string::npos) << big;
  EXPECT_NE(big.find("per token    spine 0.000 GB"), std::string::npos) << big;
  const std::string small = run("plan --model " + model + " --ram 2M --disk-gbps 1 --spine bf16", &rc);
  EXPECT_EQ(rc, 0) << small;
  EXPECT_NE(small.find("(part)"), std::string::npos) << small;
  EXPECT_GT(seconds_per_token(small), seconds_per_token(big)) << small << big;
  EXPECT_GT(seconds_per_token(big), 0) << big;
  // Twice the bandwidth, half the floor.
  const std::string fast = run("plan --model " + model + " --ram 2M --disk-gbps 2 --spine bf16", &rc);
  EXPECT_NEAR(seconds_per_token(fast) * 2, seconds_per_token(small), 1e-5) << fast;
  // Below the working minimum: the same error open_model gives.
  const std::string tiny = run("plan --model " + model + " --ram 100K", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(tiny.find("below this model's working minimum"), std::string::npos) << tiny;
}

}  // namespace
