// Expert sources after a failed read: the failure ends that forward pass with
// an error naming the shard; once the file is repaired the next pass reads it
// and gives the logits of an untouched model (the in-flight bookkeeping of the
// failed pass is gone: no "wait_any: no span outstanding", no stale slots).
#include "arch/open.h"
#include "io/expert_source.h"
#include "k3/k3_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "engine/session.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Rewrites the file in place (same inode: the model's open descriptors see it).
void overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

TEST(Experts, FailedReadFailsOnePassAndTheRepairedFileReadsAgain) {
  const std::vector<int> toks = {448, 259, 309, 412, 370, 399, 335, 283};
  std::vector<float> want;
  {
    auto ref = open_model(kFixture);
    want = Session(*ref).prefill_all(toks);
  }
  const fs::path dir = fs::path(SLUICE_BINARY).parent_path() / "experts-read-error-test";
  // 64 MiB: spine resident, experts cached; smaller: less cache, more reads
  // bypass it (budgets that stream the spine are skipped: their reads of the
  // cut shard fail in the spine stream first).
  int ran = 0;
  for (uint64_t budget : {uint64_t(64) << 20, uint64_t(12) << 20, uint64_t(8) << 20}) {
    fs::remove_all(dir);
    fs::copy(kFixture, dir);
    ModelOptions o;
    o.ram_budget = budget;
    auto m = open_model(dir.string(), o);
    if (!k3_parts(*m).plan.spine_resident) continue;
    ran++;
    // Cut the shard of the first MoE layer's experts just before its first expert.
    const ModelConfig& c = m->config();
    const FileSpan& first = k3_parts(*m).ck.experts.at(size_t(c.first_k_dense_replace)).at(0);
    const std::string shard = k3_parts(*m).ck.shard_paths[size_t(first.file)];
    uint64_t cut = first.offset;
    for (const auto& layer : k3_parts(*m).ck.experts)
      for (const FileSpan& s : layer)
        if (s.file == first.file && s.length > 0) cut = std::min(cut, s.offset);
    const std::string good = slurp(shard);
    overwrite(shard, good.substr(0, cut));
    for (int attempt = 0; attempt < 2; attempt++) {  // fails the same way each time
      try {
        Session(*m).prefill_all(toks);
        FAIL() << "no error reading a truncated shard, budget " << budget;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(shard), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("outstanding"), std::string::npos) << e.what();
      }
    }
    overwrite(shard, good);
    EXPECT_EQ(Session(*m).prefill_all(toks), want) << "budget " << budget;
    std::vector<float> steps;
    Session s(*m);
    for (int t : toks) {
      const auto& l = s.step(t);
      steps.insert(steps.end(), l.begin(), l.end());
    }
    EXPECT_EQ(steps.size(), want.size());
    m.reset();
  }
  EXPECT_GE(ran, 1);
  fs::remove_all(dir);
}

// Any header length is valid safetensors; with an odd one every tensor sits at
// an odd offset. Same logits, and no misaligned loads (the ASan+UBSan build
// flagged MLA's kv_b reads before).
TEST(Experts, OddHeaderLengthGivesIdenticalLogits) {
  const std::vector<int> toks = {448, 259, 309, 412};
  std::vector<float> want;
  {
    auto ref = open_model(kFixture);
    want = Session(*ref).prefill_all(toks);
  }
  const fs::path dir = fs::path(SLUICE_BINARY).parent_path() / "odd-header-test";
  fs::remove_all(dir);
  fs::copy(kFixture, dir);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::string b = slurp(e.path().string());
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | uint8_t(b[size_t(i)]);
    std::string header = b.substr(8, n) + (n % 2 == 0 ? " " : "");
    std::string len(8, '\0');
    for (int i = 0; i < 8; i++) len[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    overwrite(e.path().string(), len + header + b.substr(8 + n));
  }
  for (uint64_t budget : {uint64_t(64) << 20, uint64_t(2) << 20}) {
    ModelOptions o;
    o.ram_budget = budget;
    auto m = open_model(dir.string(), o);
    EXPECT_EQ(Session(*m).prefill_all(toks), want) << "budget " << budget;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice
