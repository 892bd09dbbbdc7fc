// forward_rows: one pass over rows of several sequences gives each row the
// logits (and each sequence the state) of forwarding that sequence alone,
// bitwise: on the fixture, resident and streamed (every spine piece read
// through the ring), and on generated shapes; with Logits::All and Last, and
// All with some sequences wanting only their last row; with sequences of
// different lengths and histories, and with undo records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "checkpoint/synthetic_model.h"
#include "k3/model.h"
#include "k3/state_test_util.h"

namespace sluice {
namespace {

// R sequences with different histories; then one pass of rows from all of
// them (lengths 1..4) against each fed alone.
void expect_rows_equal_alone(K3Model& m, uint32_t seed) {
  const int V = m.config().vocab_size;
  std::mt19937 rng(seed);
  auto toks = [&](int n) {
    std::vector<int> t(static_cast<size_t>(n));
    for (int& x : t) x = int(rng() % uint32_t(V));
    return t;
  };
  const int R = 4;
  std::vector<std::vector<int>> history, rows;
  for (int i = 0; i < R; i++) {
    history.push_back(toks(1 + int(rng() % 7)));
    rows.push_back(toks(1 + i % 4));
  }
  // mixed: All, with sequences 0 and 2 marked last_only (prompt chunks riding with decode rows).
  for (const std::string mode : {"all", "last", "mixed"}) {
    SCOPED_TRACE(mode);
    const Logits which = mode == "last" ? Logits::Last : Logits::All;
    auto last_only = [&](int i) { return mode == "mixed" && i % 2 == 0; };
    std::vector<SequenceState> together, alone;
    for (int i = 0; i < R; i++) {
      together.push_back(SequenceState::create(m.config()));
      forward(m, together.back(), history[size_t(i)], Logits::None, nullptr);
      alone.push_back(together.back());
    }
    std::vector<ChunkUndo> undos(R);
    std::vector<SequenceRows> seqs;
    for (int i = 0; i < R; i++)
      seqs.push_back({&together[size_t(i)], rows[size_t(i)], i % 2 ? &undos[size_t(i)] : nullptr, last_only(i)});
    std::vector<float> got;
    forward_rows(m, seqs, which, &got);
    size_t at = 0;
    for (int i = 0; i < R; i++) {
      SCOPED_TRACE(i);
      std::vector<float> want;
      forward(m, alone[size_t(i)], rows[size_t(i)], last_only(i) ? Logits::Last : which, &want);
      ASSERT_LE(at + want.size(), got.size());
      EXPECT_EQ(0, std::memcmp(got.data() + at, want.data(), want.size() * sizeof(float)));
      at += want.size();
      expect_same_state(together[size_t(i)], alone[size_t(i)]);
    }
    EXPECT_EQ(at, got.size());
    // A recorded sequence cuts back as if fed alone.
    rollback(m, together[3], undos[3], 1);
    SequenceState fresh = SequenceState::create(m.config());
    forward(m, fresh, history[3], Logits::None, nullptr);
    forward(m, fresh, std::span<const int>(rows[3]).first(1), Logits::None, nullptr);
    expect_same_state(together[3], fresh);
  }
}

const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

TEST(ForwardRows, EachRowAsAloneOnTheFixture) {
  auto m = open_k3_model(kFixture);
  expect_rows_equal_alone(*m, 1);
}

TEST(ForwardRows, EachRowAsAloneWhenTheSpineStreams) {
  ModelOptions o;
  o.ram_budget = 2 << 20;  // everything streams
  auto m = open_k3_model(kFixture, o);
  ASSERT_FALSE(m->spine->all_resident());
  expect_rows_equal_alone(*m, 2);
}

TEST(ForwardRows, EachRowAsAloneOnGeneratedShapes) {
  SyntheticShape odd = tiny_preset();  // small odd widths, MLA first and last, block 2
  odd.hidden = 96, odd.layers = 5, odd.heads = 3, odd.kda_heads = 2, odd.kda_head_dim = 24;
  odd.q_lora = 40, odd.kv_lora = 48, odd.nope = 16, odd.rope = 8, odd.v_head = 24;
  odd.experts = 12, odd.top_k = 3, odd.moe_inter = 64, odd.latent = 32, odd.shared = 1, odd.dense_inter = 80;
  odd.block = 2, odd.mla_layers = {2, 4, 5}, odd.shards = 2;
  SyntheticShape deep = tiny_preset();
  deep.layers = 13, deep.block = 4, deep.experts = 16, deep.top_k = 6, deep.kda_conv_kernel = 3;
  deep.routed_scaling_factor = 2.5, deep.shards = 4, deep.mla_layers = {};
  uint32_t seed = 11;
  for (const auto& [name, shape] : {std::pair{"odd", odd}, std::pair{"deep", deep}}) {
    SCOPED_TRACE(name);
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("sluice-rows-" + std::to_string(getpid()) + "-" + name)).string();
    std::filesystem::remove_all(dir);
    write_synthetic_model(plan_synthetic_model(shape, seed), dir);
    {
      auto m = open_k3_model(dir);
      expect_rows_equal_alone(*m, seed++);
    }
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace sluice
