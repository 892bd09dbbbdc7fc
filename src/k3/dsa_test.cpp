// K3.1 Pro's DSA layers (docs/k31-spec.md §3, §5) end to end on a k31-tiny
// checkpoint (top-k 16): a context within the top-k is dense MLA bit for bit;
// past it the selection changes the answer, prefill equals token-by-token, a
// verified chunk cut back is that prefix fed (indexer keys included), and the
// rows of several sequences in one pass are each one's own.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "arch/open.h"
#include "checkpoint/synthetic_model.h"
#include "engine/session.h"
#include "engine/session_test_util.h"
#include "k3/k3_model.h"
#include "k3/state_test_util.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

// k31-tiny written once per test binary, and the same files read as K3 (the
// config without dsa_config, the indexer tensors ignored): dense MLA on the same weights.
struct K31Tiny {
  fs::path dir, dense;
  K31Tiny() {
    dir = fs::temp_directory_path() / ("sluice-k31-" + std::to_string(getpid()));
    fs::remove_all(dir);
    write_synthetic_model(plan_synthetic_model(k31_tiny_preset(), 5), dir.string());
    dense = dir.string() + "-dense";
    fs::remove_all(dense);
    fs::create_directories(dense);
    for (const auto& e : fs::directory_iterator(dir)) fs::create_symlink(e.path(), dense / e.path().filename());
    nlohmann::json cfg;
    std::ifstream(dir / "config.json") >> cfg;
    cfg["text_config"].erase("dsa_config");
    cfg["architectures"] = {"KimiK3ForConditionalGeneration"};
    fs::remove(dense / "config.json");
    std::ofstream(dense / "config.json") << cfg.dump();
  }
  ~K31Tiny() {
    fs::remove_all(dir);
    fs::remove_all(dense);
  }
};
const K31Tiny& tiny() {
  static K31Tiny t;
  return t;
}
Model& sparse_model() {
  static std::unique_ptr<Model> m = open_model(tiny().dir.string());
  return *m;
}
Model& dense_model() {
  ModelOptions o;
  o.allow_unknown = true;
  static std::unique_ptr<Model> m = open_model(tiny().dense.string(), o);
  return *m;
}

std::vector<int> tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(static_cast<size_t>(n));
  for (int& x : t) x = int(rng() % 400) + 10;
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Dsa, K31TinyIsADsaModel) {
  const ModelConfig& c = sparse_model().config();
  ASSERT_TRUE(c.dsa);
  EXPECT_EQ(c.dsa_topk, 16);
  EXPECT_EQ(c.dsa_layer_count(), 3);  // layers 4, 8, 10 (1-based)
  EXPECT_FALSE(dense_model().config().dsa);
}

TEST(Dsa, ContextWithinTopKIsDenseMlaBitForBit) {
  const std::vector<int> t = tokens(16, 1);  // positions 0..15: every query keeps every position
  EXPECT_TRUE(same_bits(run_all(sparse_model(), t, false), run_all(dense_model(), t, false)));
  EXPECT_TRUE(same_bits(run_all(sparse_model(), t, true), run_all(dense_model(), t, true)));
}

TEST(Dsa, PastTopKTheSelectionChangesTheAnswer) {
  const std::vector<int> t = tokens(48, 2);
  const std::vector<float> s = run_all(sparse_model(), t, false), d = run_all(dense_model(), t, false);
  const size_t V = size_t(sparse_model().config().vocab_size);
  ASSERT_EQ(s.size(), 48 * V);
  // Rows 0..15 equal, later rows differ (the selection drops positions).
  EXPECT_EQ(0, std::memcmp(s.data(), d.data(), 16 * V * sizeof(float)));
  EXPECT_NE(0, std::memcmp(s.data() + 47 * V, d.data() + 47 * V, V * sizeof(float)));
}

TEST(Dsa, PrefillEqualsTokenByToken) {
  const std::vector<int> t = tokens(40, 3);
  EXPECT_TRUE(same_bits(run_all(sparse_model(), t, false), run_all(sparse_model(), t, true)));
  // And in uneven chunks.
  Session a(sparse_model()), b(sparse_model());
  a.prefill(std::span<const int>(t).first(23));
  a.prefill(std::span<const int>(t).subspan(23));
  b.prefill(t);
  expect_same_state(a.state(), b.state());
  const size_t keys = size_t(sparse_model().config().dsa_head_dim) * t.size();
  EXPECT_EQ(k3_state(a.state()).mla[3].idx.size(), keys);
  EXPECT_EQ(a.state().bytes(), b.state().bytes());
}

TEST(Dsa, RollbackOfAVerifiedChunkIsBitwiseThePrefix) {
  Model& m = sparse_model();
  const std::vector<int> prompt = tokens(14, 4), chunk = tokens(9, 5);
  for (int keep : {0, 1, 4, 9}) {
    SCOPED_TRACE(keep);
    Session a(m), b(m);
    a.prefill(prompt);
    b.prefill(prompt);
    a.verify(chunk);
    a.keep_verified(keep);
    if (keep > 0) b.prefill(std::span<const int>(chunk).first(size_t(keep)));
    expect_same_state(a.state(), b.state());
    EXPECT_EQ(a.step(77), b.step(77));
  }
}

TEST(Dsa, SeveralSequencesInOnePassAreEachTheirOwn) {
  Model& m = sparse_model();
  const std::vector<int> t1 = tokens(30, 6), t2 = tokens(20, 7);
  ModelState s1 = m.new_state(), s2 = m.new_state();
  std::vector<float> both, one, two;
  const ModelRows rows[2] = {{&s1, t1}, {&s2, t2}};
  m.forward_rows(rows, Logits::Last, &both);
  ModelState a = m.new_state(), b = m.new_state();
  m.forward(a, t1, Logits::Last, &one);
  m.forward(b, t2, Logits::Last, &two);
  const size_t V = size_t(m.config().vocab_size);
  EXPECT_EQ(0, std::memcmp(both.data(), one.data(), V * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(both.data() + V, two.data(), V * sizeof(float)));
  expect_same_state(s1, a);
  expect_same_state(s2, b);
}

}  // namespace
}  // namespace sluice
