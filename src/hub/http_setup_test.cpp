#include "hub/http_setup.h"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "hub/verify_install.h"

namespace sluice {
namespace {

const std::string kModel = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

TEST(HttpSetup, RoutedExpertTensorNames) {
  EXPECT_TRUE(is_routed_expert_tensor("language_model.model.layers.3.block_sparse_moe.experts.17.w1.weight_packed"));
  EXPECT_TRUE(is_routed_expert_tensor("model.layers.3.block_sparse_moe.experts.0.w2.weight_scale"));
  EXPECT_FALSE(is_routed_expert_tensor("model.layers.3.block_sparse_moe.shared_experts.gate_proj.weight"));
  EXPECT_FALSE(is_routed_expert_tensor("model.layers.3.block_sparse_moe.experts.gate.weight"));
  EXPECT_FALSE(is_routed_expert_tensor("model.layers.3.block_sparse_moe.gate.weight"));
}

// The spine runs of every fixture shard cover every non-expert tensor and no
// byte of any expert span; together with the experts they cover the tensors.
TEST(HttpSetup, SpineRunsAvoidEveryFileSpan) {
  Checkpoint ck = open_checkpoint(kModel);
  for (size_t s = 0; s < ck.shard_paths.size(); s++) {
    ShardHeader h = read_safetensors_header(ck.shard_paths[s]);
    std::vector<ByteRun> runs = spine_runs(h);
    ASSERT_FALSE(runs.empty());
    for (size_t i = 1; i < runs.size(); i++) EXPECT_GE(runs[i].offset, runs[i - 1].offset + runs[i - 1].length);
    auto in_runs = [&](uint64_t begin, uint64_t end) {
      for (const ByteRun& r : runs)
        if (begin >= r.offset && end <= r.offset + r.length) return true;
      return false;
    };
    auto touches_runs = [&](uint64_t begin, uint64_t end) {
      for (const ByteRun& r : runs)
        if (begin < r.offset + r.length && r.offset < end) return true;
      return false;
    };
    uint64_t spine = 0, expert = 0;
    for (const TensorInfo& t : h.tensors) {
      if (is_routed_expert_tensor(t.name)) {
        expert += t.nbytes;
        EXPECT_FALSE(touches_runs(t.offset, t.offset + t.nbytes)) << t.name;
      } else {
        spine += t.nbytes;
        EXPECT_TRUE(in_runs(t.offset, t.offset + t.nbytes)) << t.name;
      }
    }
    for (const auto& layer : ck.experts)
      for (const FileSpan& e : layer)
        if (e.file == int(s)) {
          EXPECT_FALSE(touches_runs(e.offset, e.offset + e.length));
        }
    uint64_t run_bytes = 0;
    for (const ByteRun& r : runs) run_bytes += r.length;
    EXPECT_GE(run_bytes, spine);
    EXPECT_EQ(h.data_start + spine + expert, h.file_size) << "fixture tensors are packed back to back";
    EXPECT_GT(expert, 0u);
  }
}

TEST(HttpSetup, VerifyAcceptsAPlainCheckpointDirectory) {
  std::vector<VerifyLine> lines;
  VerifyResult r = verify_model(kModel, false, [&](const VerifyLine& l) { lines.push_back(l); });
  EXPECT_EQ(r.problems, 0);
  bool noted = false, indexed = false;
  for (const auto& l : lines) {
    noted = noted || (l.level == VerifyLevel::note && l.text.find("hashes cannot be checked") != std::string::npos);
    indexed = indexed || (l.level == VerifyLevel::ok && l.text.find("span index") != std::string::npos);
  }
  EXPECT_TRUE(noted);
  EXPECT_TRUE(indexed);
}

TEST(HttpSetup, VerifyReportsAMissingDirectory) {
  VerifyResult r = verify_model(kModel + "/does-not-exist", false, [](const VerifyLine&) {});
  EXPECT_GT(r.problems, 0);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST(SetupSelects, IncludeThenExcludeGlobs) {
  SetupOptions o;
  EXPECT_TRUE(setup_selects(o, "config.json"));
  o.include = {"*.json", "tiktoken.*"};
  EXPECT_TRUE(setup_selects(o, "config.json"));
  EXPECT_TRUE(setup_selects(o, "sub/dir/x.json"));  // '*' crosses '/'
  EXPECT_TRUE(setup_selects(o, "tiktoken.model"));
  EXPECT_FALSE(setup_selects(o, "model-00001-of-00002.safetensors"));
  o.exclude = {"model.safetensors.index.json"};
  EXPECT_FALSE(setup_selects(o, "model.safetensors.index.json"));
  EXPECT_TRUE(setup_selects(o, "config.json"));
  o.include.clear();
  EXPECT_TRUE(setup_selects(o, "model-00001-of-00002.safetensors"));
}

}  // namespace
}  // namespace sluice
