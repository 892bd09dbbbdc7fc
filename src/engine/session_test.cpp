// Prefill of T tokens equals T−1 tokens then one decode step, and any chunking
// of the prompt: logits and the whole sequence state (KDA S and conv history,
// MLA cache), bitwise.
#include "engine/session.h"

#include <gtest/gtest.h>

#include <random>

#include "arch/open.h"
#include "k3/k3_model.h"

namespace sluice {

// Checks the prefill/decode identity on the model at `dir` with a random prompt.
void expect_prefill_equals_steps(const std::string& dir, int T, uint32_t seed) {
  auto m = open_model(dir);
  const int V = m->config().vocab_size;
  std::mt19937 rng(seed);
  std::vector<int> toks(static_cast<size_t>(T));
  for (int& t : toks) t = int(rng() % uint32_t(V));

  Session whole(*m);
  std::vector<float> all = whole.prefill_all(toks);

  Session split(*m);
  split.prefill(std::span<const int>(toks).first(size_t(T - 1)));
  std::vector<float> last = split.step(toks.back());
  ASSERT_EQ(last.size(), size_t(V));
  for (int i = 0; i < V; i++) ASSERT_EQ(last[size_t(i)], all[size_t(T - 1) * V + i]) << "logit " << i;

  Session chunks(*m);
  std::vector<float> chunked;
  for (int at = 0; at < T; at += 7) {
    int n = std::min(7, T - at);
    const std::vector<float>& l = chunks.prefill_all(std::span<const int>(toks).subspan(size_t(at), size_t(n)));
    chunked.insert(chunked.end(), l.begin(), l.end());
  }
  ASSERT_EQ(chunked, all);

  for (const Session* s : {&split, &chunks}) {
    const SequenceState& a = k3_state(whole.state());
    const SequenceState& b = k3_state(s->state());
    EXPECT_EQ(a.pos, b.pos);
    for (size_t l = 0; l < a.kda.size(); l++) {
      EXPECT_EQ(a.kda[l].S, b.kda[l].S) << "KDA state of layer " << l;
      EXPECT_EQ(a.kda[l].conv, b.kda[l].conv) << "conv history of layer " << l;
      EXPECT_EQ(a.mla[l].kv, b.mla[l].kv) << "MLA cache of layer " << l;
    }
  }
}

TEST(Session, PrefillEqualsStepsOnFixture) {
  expect_prefill_equals_steps(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model", 23, 1);
}

TEST(Session, SnapshotRestoreRollsBack) {
  auto m = open_model(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  Session s(*m);
  const int prompt[] = {448, 259, 309, 412};
  s.prefill(prompt);
  Session::Snapshot snap = s.snapshot();
  std::vector<float> a = s.step(370);
  s.step(399);
  s.restore(snap);
  EXPECT_EQ(s.tokens().size(), 4u);
  EXPECT_EQ(s.step(370), a);
}

}  // namespace sluice

#include <filesystem>
#include <unistd.h>

#include "checkpoint/synthetic_model.h"

namespace sluice {
namespace {

// Generated models of shapes the fixture does not have.
struct GeneratedModel {
  std::string dir;
  GeneratedModel(const SyntheticShape& shape, uint64_t seed, const std::string& tag) {
    dir = (std::filesystem::temp_directory_path() / ("sluice-gen-" + std::to_string(getpid()) + "-" + tag)).string();
    std::filesystem::remove_all(dir);
    write_synthetic_model(plan_synthetic_model(shape, seed), dir);
  }
  ~GeneratedModel() { std::filesystem::remove_all(dir); }
};

std::vector<std::pair<std::string, SyntheticShape>> shapes() {
  std::vector<std::pair<std::string, SyntheticShape>> out;
  out.push_back({"tiny", tiny_preset()});
  SyntheticShape odd = tiny_preset();  // small odd widths, MLA first and last, block 2
  odd.hidden = 96, odd.layers = 5, odd.heads = 3, odd.kda_heads = 2, odd.kda_head_dim = 24;
  odd.q_lora = 40, odd.kv_lora = 48, odd.nope = 16, odd.rope = 8, odd.v_head = 24;
  odd.experts = 12, odd.top_k = 3, odd.moe_inter = 64, odd.latent = 32, odd.shared = 1, odd.dense_inter = 80;
  odd.block = 2, odd.mla_layers = {2, 4, 5}, odd.shards = 2;
  out.push_back({"odd", odd});
  SyntheticShape deep = tiny_preset();  // more layers and blocks, scaled routing, long conv
  deep.layers = 13, deep.block = 4, deep.experts = 16, deep.top_k = 6, deep.kda_conv_kernel = 3;
  deep.routed_scaling_factor = 2.5, deep.shards = 4, deep.mla_layers = {};
  out.push_back({"deep", deep});
  return out;
}

TEST(Session, PrefillEqualsStepsOnGeneratedModels) {
  uint32_t seed = 7;
  for (const auto& [name, shape] : shapes()) {
    SCOPED_TRACE(name);
    GeneratedModel g(shape, seed, name);
    expect_prefill_equals_steps(g.dir, 19, seed++);
  }
}

}  // namespace
}  // namespace sluice
