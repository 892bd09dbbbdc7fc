// sluice plan: the plan open_model would follow, and the I/O floor per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "kernels/fast.h"

namespace {

std::string run(const std::string& args, int* rc) {
  // No saved engine measurement unless a test gives one ("SLUICE_COMPUTE_PROFILE=FILE args"): the kernel probe's floor.
  std::string env = "SLUICE_COMPUTE_PROFILE=/nonexistent", rest = args;
  if (args.rfind("SLUICE_COMPUTE_PROFILE=", 0) == 0) env = args.substr(0, args.find(' ')), rest = args.substr(args.find(' ') + 1);
  const std::string cmd = env + " " + std::string(SLUICE_BINARY) + " " + rest + " 2>&1";
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

// The projection line's seconds per token (the only "s/token" in the output).
TEST(CliPlan, ResidentSpineReadsOnlyExpertsAndLessRamStreamsMore) {
  const std::string model = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";
  int rc = 0;
  const std::string big = run("plan --model " + model + " --ram 1G --disk-gbps 1 --spine bf16 --probe-seconds 0.05", &rc);
  EXPECT_EQ(rc, 0) << big;
  EXPECT_NE(big.find("(all of it)"), std::string::npos) << big;
  EXPECT_NE(big.find("spine streamed 0.000 GB, head streamed 0.000 GB"), std::string::npos) << big;
  EXPECT_GT(seconds_per_token(big), 0) << big;
#if defined(__SANITIZE_ADDRESS__)
  // The rest plans 3 MB above the working minimum, which includes the
  // process's resident set when it plans: under ASan that moves by more
  // between two runs (the sanitizer's allocator), so it is the release build's check.
  GTEST_SKIP() << "budget-edge checks run in the release build";
#endif
  // A budget just above the working minimum streams part of the spine. The
  // fixture streams all of it from the minimum up to ~4 MB above and holds it
  // whole from ~7.5 MB above (the long context's state first, then 3 MB of
  // spine): 3 MB up keeps clear of both edges when the next process's
  // resident set, part of the minimum, lands a MB away from this one's.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(big, m, std::regex("working minimum ([0-9.]+) GB"))) << big;
  const std::string ram = std::to_string(int(std::stod(m[1]) * 1e9 / 1024 + 3000)) + "K";
  const std::string small = run("plan --model " + model + " --ram " + ram + " --disk-gbps 0.001 --spine bf16 --probe-seconds 0.05", &rc);
  EXPECT_EQ(rc, 0) << small;
  EXPECT_NE(small.find("(part)"), std::string::npos) << small;
  // At a slow disk the step is I/O-bound (the streamed spine's reads exceed
  // what compute hides them behind): twice the bandwidth, half the time.
  const std::string fast = run("plan --model " + model + " --ram " + ram + " --disk-gbps 0.002 --spine bf16 --probe-seconds 0.05", &rc);
  EXPECT_NE(small.find("I/O-bound"), std::string::npos) << small;
  EXPECT_NEAR(seconds_per_token(fast) * 2, seconds_per_token(small), 0.002) << fast;
  // Below the working minimum: the same error open_model gives.
  const std::string tiny = run("plan --model " + model + " --ram 100K", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(tiny.find("below this model's working minimum"), std::string::npos) << tiny;
}

double number_after(const std::string& out, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(label + " ([0-9.]+)"))) return -1;
  return std::stod(m[1]);
}

// K3 with no weights: the contract line, and the plan moving the right way
// with RAM, disk, spine format and cores.
TEST(CliPlan, PresetK3NeedsNoWeights) {
  int rc = 0;
  const std::string k = "plan --preset k3 --probe-seconds 0.05";
  const std::string p64 = run(k + " --ram 64G --disk-gbps 7", &rc);
  ASSERT_EQ(rc, 0) << p64;
  EXPECT_NE(p64.find("Kimi K3"), std::string::npos) << p64;
  EXPECT_NE(p64.find("(part)"), std::string::npos) << p64;
  EXPECT_GT(seconds_per_token(p64), 1.0) << p64;  // ~55 GB of spine streams per token
  const std::string p512 = run(k + " --ram 512G --disk-gbps 7 --hit-rate 0", &rc);
  EXPECT_NE(p512.find("(all of it)"), std::string::npos) << p512;
  EXPECT_LT(number_after(p512, "I/O floor   "), number_after(p64, "I/O floor   ")) << p512;
  // With the spine resident a token reads only experts, and those reads wait
  // for their routers: the step is the compute floor plus the missed experts'
  // reads at the disk rate, not the larger of the two.
  {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(p512, m, std::regex("experts ([0-9.]+) GB \\(([0-9]+) of ([0-9]+) read"))) << p512;
    const double experts_gb = std::stod(m[1]);
    EXPECT_EQ(m[2], m[3]) << p512;  // hit rate 0: every touched expert is read
    const double wait = number_after(p512, "compute floor \\+");
    EXPECT_NEAR(wait, experts_gb / 7, 0.002) << p512;
    const double critical = number_after(p512, "critical path");
    EXPECT_NEAR(critical, number_after(p512, "compute floor") + wait, 0.002) << p512;
    EXPECT_GT(critical, number_after(p512, "I/O floor   ")) << p512;
    EXPECT_NEAR(seconds_per_token(p512), critical, 0.002) << p512;
    // A cache that serves half the touched experts halves the wait.
    const std::string h = run(k + " --ram 512G --disk-gbps 7 --hit-rate 0.5", &rc);
    EXPECT_NEAR(number_after(h, "compute floor \\+"), wait / 2, 0.002) << h;
  }
  // Lossless (modelled at nanoK3's ratio): fewer bytes streamed, some decoding.
  const std::string l64 = run(k + " --ram 64G --disk-gbps 7 --spine lossless", &rc);
  ASSERT_EQ(rc, 0) << l64;
  EXPECT_NE(l64.find("measured on nanoK3"), std::string::npos) << l64;
  const double bf16_spine = number_after(p64, "spine streamed"), lossless_spine = number_after(l64, "spine streamed");
  EXPECT_GT(bf16_spine, 10) << p64;
  EXPECT_LT(lossless_spine, 0.7 * bf16_spine) << l64;
  EXPECT_GT(number_after(l64, ", decode"), 0) << l64;
  // --cores N: one core's rates times N, and the compute floor is bytes / rate.
  const std::string c8 = run(k + " --ram 512G --cores 8 --disk-gbps 7", &rc);
  EXPECT_NE(c8.find("times 8 cores"), std::string::npos) << c8;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(c8, m, std::regex("kernel floor [0-9.]+ s per token: bf16 ([0-9.]+) GB \\(([0-9.]+) s\\)")))
      << c8;
  EXPECT_NEAR(std::stod(m[1]) / number_after(c8, "bf16 matvec"), std::stod(m[2]), 0.01 * std::stod(m[2]) + 0.002) << c8;
  // int8 (modelled: its exact row bytes): about half the spine, through the int8 kernel.
  const std::string i64 = run(k + " --ram 64G --disk-gbps 7 --spine int8", &rc);
  ASSERT_EQ(rc, 0) << i64;
  EXPECT_NE(i64.find("int8, modelled"), std::string::npos) << i64;
  EXPECT_GT(number_after(i64, "s per token: bf16 [0-9.]+ GB \\([0-9.]+ s\\), int8"), 50) << i64;  // GB through int8
  EXPECT_LT(number_after(i64, "spine streamed"), 0.55 * bf16_spine) << i64;
  EXPECT_LT(number_after(i64, "I/O floor   "), number_after(l64, "I/O floor   ")) << i64;
  EXPECT_GT(seconds_per_token(i64), 0) << i64;
  // The guesses: misses they catch are read a layer ahead, beside one layer's
  // compute (only what that does not hide waits); wrong guesses add reads.
  {
    // A disk slow enough that a layer's reads outlast its compute on any
    // machine (the compute is measured here: under ASan on 2 cores a layer
    // took 0.8 s, longer than its 0.28 GB at 0.5 GB/s): reads spill.
    const std::string g = run(k + " --ram 512G --disk-gbps 0.05 --guess-recall 1 --hit-rate 0", &rc);
    ASSERT_EQ(rc, 0) << g;
    EXPECT_EQ(number_after(g, "compute floor \\+"), 0) << g;  // no miss left for after the router
    const double lead = number_after(g, "one layer's compute of");
    EXPECT_NEAR(lead, number_after(g, "compute floor") / 93, 0.001) << g;
    const double experts_gb = number_after(g, "per token .* experts");
    const double spill = number_after(g, "s reading the missed experts no guess caught \\(after their router; --guess-recall [0-9.]+\\) \\+");
    EXPECT_GT(spill, 1) << g;
    // Within the printed digits: experts_gb to 1e-3 GB (0.01 s at 0.05 GB/s), the lead to 1e-3 s (x 92).
    EXPECT_NEAR(spill, 92 * std::max(0.0, experts_gb / 92 / 0.05 - lead), 0.1) << g;
    const std::string w = run(k + " --ram 512G --disk-gbps 7 --guess-waste 0.5 --hit-rate 0", &rc);
    EXPECT_NEAR(number_after(w, "per token .* experts"), 1.5 * experts_gb, 0.002) << w;
    EXPECT_NE(w.find("wrong guesses at --guess-waste 0.50"), std::string::npos) << w;
  }
  // The kernel floor unless told otherwise, and it says so.
  EXPECT_NE(p64.find("no engine measurement saved"), std::string::npos) << p64;
  // A saved engine measurement of this very step: the compute floor is its time.
  {
    const int threads = int(number_after(p512, "measured here now \\(wall time\\) on"));
    const double bf16_gb = number_after(p512, "s per token: bf16"), mx_gb = number_after(p512, "\\(0.000 s\\), experts");
    ASSERT_GT(threads, 0) << p512;
    ASSERT_GT(mx_gb, 0) << p512;
    const std::string path = std::string(SLUICE_BINARY) + ".plan_test_compute.json";
    std::ofstream(path) << R"({"runs": [{"model": "/m", "when": "then", "kernels": ")"
                        << sluice::fast::isa_name(sluice::fast::best_isa()) << R"(", "threads": )" << threads
                        << R"(, "compute_s_per_token": 2.0, "bytes": {"bf16": )" << bf16_gb * 1e9
                        << R"(, "int8": 0, "mxfp4": )" << mx_gb * 1e9 << R"(, "decoded": 0}}]})";
    const std::string sv = run("SLUICE_COMPUTE_PROFILE=" + path + " " + k +
                                   " --ram 512G --disk-gbps 7",
                               &rc);
    ASSERT_EQ(rc, 0) << sv;
    EXPECT_NE(sv.find("median of 1 run"), std::string::npos) << sv;
    EXPECT_NEAR(number_after(sv, "compute floor"), 2.0, 0.01) << sv;
    const std::string kp = run("SLUICE_COMPUTE_PROFILE=" + path + " " + k + " --ram 512G --disk-gbps 7 --kernel-probe", &rc);
    EXPECT_NE(kp.find("the kernel floor (--kernel-probe)"), std::string::npos) << kp;
    std::remove(path.c_str());
  }
  // One of --model and --preset.
  EXPECT_NE(run("plan --ram 1G", &rc).find("--model DIR or --preset k3"), std::string::npos);
  EXPECT_NE(rc, 0);
}

std::string first_line(const std::string& out) { return out.substr(0, out.find('\n')); }

// The first line answers in words; --ram-budget is --ram.
TEST(CliPlan, FirstLineAnswersInWords) {
  int rc = 0;
  const std::string k = "plan --preset k3 --probe-seconds 0.05 --probe-rounds 2";
  const std::string p = run(k + " --ram 64G --disk-gbps 7", &rc);
  ASSERT_EQ(rc, 0) << p;
  const std::string line = first_line(p);
  EXPECT_NE(line.find("s per token"), std::string::npos) << p;
  // "here" where the machine has the RAM, else what it has.
  EXPECT_TRUE(std::regex_search(line, std::regex(R"(^Kimi K3 will run (here \(budget 64.0 GiB\)|with 64.0 GiB of RAM \(more than .*\)): about [0-9.]+ s per token)")))
      << line;
  EXPECT_NE(line.find("a 300-token answer in about "), std::string::npos) << p;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(needs ([0-9.]+) TB of disk \(a stream install: ([0-9]+) GB\))")))
      << line;
  EXPECT_GT(std::stod(m[1]), 1.0) << line;  // ~1.5 TB of weights
  EXPECT_LT(std::stod(m[2]), 400) << line;  // all but the routed experts
  EXPECT_NE(p.find("projected    "), std::string::npos) << p;
  const std::string b = run(k + " --ram-budget 64G --disk-gbps 7", &rc);
  ASSERT_EQ(rc, 0) << b;
  EXPECT_EQ(number_after(b, "budget      "), number_after(p, "budget      ")) << b;
  // More RAM than this machine has: "would", and what it has.
  const std::string big = run(k + " --ram 64T --disk-gbps 7", &rc);
  EXPECT_EQ(first_line(big).rfind("Kimi K3 will run with 64.0 TiB of RAM (more than ", 0), 0u) << big;
  // Below the working minimum: the answer says so first.
  const std::string no = run(k + " --ram 1G --disk-gbps 7", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(no.rfind("Kimi K3 will not run with a 1G budget: ", 0), 0u) << no;
}

// The hit rate the cache justifies: every expert in RAM -> hits (no expert
// read per token); part of them -> the cache's share; --hit-rate overrides.
TEST(CliPlan, HitRateFollowsWhatTheCacheHolds) {
  int rc = 0;
  const std::string k = "plan --preset k3 --probe-seconds 0.05 --probe-rounds 2 --disk-gbps 7";
  const std::string all = run(k + " --ram 2T", &rc);
  ASSERT_EQ(rc, 0) << all;
  EXPECT_NE(all.find("hit rate     1.00: every expert fits in the"), std::string::npos) << all;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(all, m, std::regex("experts ([0-9.]+) GB \\(([0-9]+) of ([0-9]+) read"))) << all;
  EXPECT_EQ(std::stod(m[1]), 0.0) << all;
  EXPECT_EQ(m[2], "0") << all;
  const std::string misses = run(k + " --ram 2T --hit-rate 0", &rc);
  // The I/O floor, not the projection: the kernel rates are measured in each
  // run, and a busy machine (ASan in CI) spreads them more than the misses add.
  EXPECT_EQ(number_after(all, "I/O floor   "), 0.0) << all;
  EXPECT_GT(number_after(misses, "I/O floor   "), 3.0) << misses;  // 25.8 GB at 7 GB/s
  const std::string part = run(k + " --ram 512G", &rc);
  ASSERT_TRUE(std::regex_search(part, m, std::regex(R"(hit rate     ([0-9.]+): the cache holds ([0-9.]+) % of all experts)")))
      << part;
  EXPECT_GT(std::stod(m[1]), 0.0) << part;
  EXPECT_LT(std::stod(m[1]), 1.0) << part;
  EXPECT_NEAR(std::stod(m[1]), std::stod(m[2]) / 100, 0.006) << part;
  ASSERT_TRUE(std::regex_search(part, m, std::regex("\\(([0-9]+) of ([0-9]+) read at hit rate ([0-9.]+)"))) << part;
  // The rate is printed to two places: the count may differ by half a hundredth of the reads.
  EXPECT_NEAR(std::stod(m[1]), std::stod(m[2]) * (1 - std::stod(m[3])), std::stod(m[2]) * 0.005 + 1) << part;
}

// Without --disk-gbps the disk is measured: the model's shards, or a scratch
// file in --dest (removed after); a file system without O_DIRECT is said.
TEST(CliPlan, MeasuresTheDiskUnlessTold) {
  const std::string model = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";
  int rc = 0;
  const std::string p = run("plan -m " + model + " --ram 1G --probe-seconds 0.05 --probe-rounds 1 --disk-probe-seconds 0.15", &rc);
  ASSERT_EQ(rc, 0) << p;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(p, m, std::regex(R"(\ndisk         ([0-9.]+) GB/s (measured on the disk of |assumed 7 GB/s: )(.*))")))
      << p;
  if (m[2] == "measured on the disk of ") {
    EXPECT_NE(m[3].str().find(model), std::string::npos) << p;
    EXPECT_NE(m[3].str().find("rounds spread"), std::string::npos) << p;
  }
  EXPECT_NEAR(number_after(p, "GB at"), std::stod(m[1]), 0.006) << p;  // the I/O floor uses it
  const std::string dest = std::string(SLUICE_BINARY) + ".plan_dest";
  std::filesystem::create_directories(dest);
  const std::string d = run("plan --preset k3 --ram 64G --probe-seconds 0.05 --probe-rounds 1 --disk-probe-seconds 0.15 --dest " + dest, &rc);
  ASSERT_EQ(rc, 0) << d;
  EXPECT_NE(first_line(d).find("s per token"), std::string::npos) << d;
  EXPECT_TRUE(std::regex_search(d, std::regex("\ndisk         [0-9.]+ GB/s (measured on the disk of " + dest + "|assumed)"))) << d;
  EXPECT_TRUE(std::filesystem::is_empty(dest)) << "the scratch file was left in " << dest;
  std::filesystem::remove_all(dest);
}

// The token boundary (head, the layers before the first MoE layer, its
// attention and router) has no expert read of the step to overlap, so a step
// takes at least the boundary plus every expert byte at the disk rate. bench
// measures the boundary, --save-compute keeps it, and plan uses it.
TEST(CliPlan, TheTokenBoundaryComesBeforeTheExpertReads) {
  const std::string model = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";
  const std::string path = std::string(SLUICE_BINARY) + ".plan_boundary_compute.json";
  std::remove(path.c_str());
  int rc = 0;
  const std::string b = run("SLUICE_COMPUTE_PROFILE=" + path + " bench -m " + model +
                                " -p 4 -n 4 --probe-seconds 0 --no-replay --save-compute --json",
                            &rc);
  ASSERT_EQ(rc, 0) << b;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(b, m, std::regex("\"token_boundary_s_per_token\":\\s*([0-9.eE+-]+)"))) << b;
  const double boundary = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(b, m, std::regex("\"decode_compute_s_per_token\":\\s*([0-9.eE+-]+)"))) << b;
  EXPECT_GT(boundary, 0) << b;
  EXPECT_LE(boundary, std::stod(m[1])) << b;  // a part of the compute: no read waits inside it
  std::ifstream saved(path);
  const std::string text((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("boundary_s_per_token"), std::string::npos) << text;
  EXPECT_NE(text.find("boundary_bytes"), std::string::npos) << text;
  // A disk slow enough that the expert reads outlast any compute: the
  // boundary's path sets the step, with bench's boundary (this very model: no scaling).
  const std::string p = run("SLUICE_COMPUTE_PROFILE=" + path + " plan --model " + model +
                                " --disk-gbps 0.0005 --spine bf16 --probe-seconds 0.05 --probe-rounds 1 --guess-recall 1 --hit-rate 0",
                            &rc);
  ASSERT_EQ(rc, 0) << p;
  EXPECT_NE(p.find("`sluice bench --save-compute`'s, scaled to these bytes"), std::string::npos) << p;
  const double plan_boundary = number_after(p, "the token boundary's");
  EXPECT_NEAR(plan_boundary, boundary, 0.0006) << p;
  ASSERT_TRUE(std::regex_search(p, m, std::regex("every expert byte at the disk rate \\(([0-9.]+) s\\)"))) << p;
  const double reads = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(p, m, std::regex("does not hide \\(([0-9.]+) s\\)"))) << p;
  const double guessed = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(p, m, std::regex("the compute after it \\([0-9.-]+ s\\) \\(([0-9.]+) s\\)"))) << p;
  const double boundary_path = std::stod(m[1]);
  EXPECT_GT(reads, 0.01) << p;
  EXPECT_NEAR(boundary_path, plan_boundary + reads, 0.002) << p;
  EXPECT_NEAR(number_after(p, "critical path"), std::max(guessed, boundary_path), 0.002) << p;
  EXPECT_NEAR(seconds_per_token(p), std::max(number_after(p, "I/O floor   "), std::max(guessed, boundary_path)), 0.002)
      << p;
  std::remove(path.c_str());
}

}  // namespace

// Issue 35: one rate per drive projects the striped placement: four 7 GB/s
// drives below one, an unequal trio at the busiest drive's share, and a bad
// rate refused naming the flag.
TEST(CliPlan, SeveralDrivesProjectBelowOne) {
  int rc = 0;
  // Many cores: the projection is the reads' (a busy machine's kernel probe cannot swing it).
  const std::string k = "plan --preset k3 --ram 128G --probe-seconds 0.05 --cores 512 --hit-rate 0";
  const std::string one = run(k + " --disk-gbps 7", &rc);
  ASSERT_EQ(rc, 0) << one;
  const std::string four = run(k + " --disk-gbps 7,7,7,7", &rc);
  ASSERT_EQ(rc, 0) << four;
  EXPECT_NE(four.find("s/token"), std::string::npos) << four;
  EXPECT_NE(four.find("4 drives, experts per layer 224/224/224/224"), std::string::npos) << four;
  EXPECT_NEAR(number_after(four, "disk        "), 28, 0.01) << four;
  EXPECT_LT(seconds_per_token(four), seconds_per_token(one)) << four;
  const std::string trio = run(k + " --disk-gbps 7,7,3.5", &rc);
  ASSERT_EQ(rc, 0) << trio;
  EXPECT_LT(number_after(trio, "disk        "), 17.5 + 1e-9) << trio;
  EXPECT_GT(number_after(trio, "disk        "), 17.0) << trio;
  const std::string bad = run(k + " --disk-gbps 7,x", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(bad.find("--disk-gbps"), std::string::npos) << bad;
  // At 64G the spine streams: from the first drive, or striped (--stripe-spine) at the four's sum.
  const std::string k64 = "plan --preset k3 --ram 64G --probe-seconds 0.05 --cores 512 --hit-rate 0 --disk-gbps 7,7,7,7";
  const std::string first = run(k64, &rc);
  ASSERT_EQ(rc, 0) << first;
  const std::string striped = run(k64 + " --stripe-spine", &rc);
  ASSERT_EQ(rc, 0) << striped;
  EXPECT_NE(first.find("(the first drive)"), std::string::npos) << first;
  EXPECT_NE(striped.find("at 28.00 GB/s (striped over the drives)"), std::string::npos) << striped;
  EXPECT_LT(number_after(striped, "I/O floor   "), 0.5 * number_after(first, "I/O floor   ")) << striped;
}

// A model with a stripe (io/stripe.h) is measured on its drives, each on its
// own files, the experts at the busiest drive's share and the spine on the
// shards; once moved (their experts holes) the spine's disk on a scratch
// file; with the spine striped, at the drives' sum.
TEST(CliPlan, AStripedModelIsMeasuredOnItsDrives) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(SLUICE_BINARY).parent_path() / "plan-stripe-test";
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy(fs::path(SLUICE_SOURCE_DIR) / "models/nanok3", root / "m", fs::copy_options::recursive);
  const std::string m = (root / "m").string(), drives = (root / "a").string() + ":2," + (root / "b").string() + ":1";
  const std::string p = "plan -m " + m + " --ram 1G --probe-seconds 0.05 --probe-rounds 1 --disk-probe-seconds 0.3";
  int rc = 0;
  const std::string stripe = run("stripe -m " + m + " --drives " + drives, &rc);
  ASSERT_EQ(rc, 0) << stripe;
  std::string out = run(p, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\ndisk +[0-9.]+ GB/s measured on the 2 drives of the stripe \([0-9.]+/[0-9.]+ GB/s)"))) << out;
  EXPECT_NE(out.find("on the shards"), std::string::npos) << out;
  EXPECT_NE(out.find("(the shards' disk)"), std::string::npos) << out;
  run("stripe -m " + m + " --drives " + drives + " --move", &rc);
  ASSERT_EQ(rc, 0);
  out = run(p, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("on a scratch file beside the shards"), std::string::npos) << out;
  run("stripe -m " + m + " --drives " + drives + " --spine", &rc);
  ASSERT_EQ(rc, 0);
  out = run(p, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("over the drives (stripe --spine)"), std::string::npos) << out;
  EXPECT_NE(out.find("(striped over the drives)"), std::string::npos) << out;
  for (const auto& e : fs::directory_iterator(root / "m")) EXPECT_EQ(e.path().filename().string().find(".sluice-plan-probe"), std::string::npos);
  fs::remove_all(root);
}

namespace {

// Issue 37's contract: with --vram, plan names what is on the GPU and what the
// CPU computes, and projects seconds per token; more VRAM is never slower.
TEST(CliPlan, VramPlacesTheSpineAndProjects) {
  int rc = 0;
  const std::string k = "plan --preset k3 --ram 128G --disk-gbps 7 --probe-seconds 0.05 --kernel-probe";
  const std::string v24 = run(k + " --vram 24G", &rc);
  ASSERT_EQ(rc, 0) << v24;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(v24, m, std::regex("placement +on the GPU: (.*); the CPU computes: (.*); experts:")))
      << v24;
  EXPECT_NE(m[1].str().find("of spine"), std::string::npos) << v24;
  EXPECT_NE(m[2].str().find("from RAM"), std::string::npos) << v24;
  ASSERT_TRUE(std::regex_search(v24, m, std::regex("with GPU +([0-9.]+) s/token"))) << v24;
  const double s24 = std::stod(m[1]);
  EXPECT_GT(s24, 0) << v24;
  // A 141 GB card holds the whole spine, and (same line, same measured CPU
  // rates) beats the CPU alone.
  const std::string h200 = run(k + " --gpu h200", &rc);
  ASSERT_EQ(rc, 0) << h200;
  EXPECT_NE(h200.find("H200: 141 GB"), std::string::npos) << h200;
  EXPECT_TRUE(std::regex_search(h200, std::regex("layers 0-92 of 93 and the head \\([0-9.]+ GB of spine\\)"))) << h200;
  EXPECT_NE(h200.find("the CPU computes: nothing of the spine"), std::string::npos) << h200;
  ASSERT_TRUE(std::regex_search(h200, m, std::regex("with GPU +([0-9.]+) s/token.*all on the CPU ([0-9.]+) s/token")))
      << h200;
  EXPECT_LT(std::stod(m[1]), std::stod(m[2])) << h200;
  // --gpu-layers 0: nothing of the spine on the GPU.
  const std::string none = run(k + " --vram 24G --gpu-layers 0", &rc);
  EXPECT_NE(none.find("on the GPU: no whole layer (0.00 GB of spine)"), std::string::npos) << none;
  EXPECT_NE(run("plan --preset k3 --gpu 9999", &rc).find("--gpu"), std::string::npos);  // refused before planning
  EXPECT_NE(rc, 0);
}

}  // namespace
