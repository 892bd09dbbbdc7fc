// K3's shipped config and the layout-only checkpoint `sluice plan --preset k3`
// plans with: the config is the real K3's, and the spine bound from it alone
// holds exactly the parameters docs/k3-spec.md §2.11 counts.
#include "k3/k3_config.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "base/error.h"
#include "k3/model.h"
#include "k3/spine.h"
#include "pack/pack.h"

namespace sluice {
namespace {

TEST(K3Config, IsTheRealK3) {
  const ModelConfig c = k3_config();
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 93);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.num_experts, 896);
  EXPECT_EQ(c.num_experts_per_token, 16);
  int kda = 0, moe = 0;
  for (int l = 0; l < c.num_hidden_layers; l++) kda += c.is_kda_layer(l), moe += c.is_moe_layer(l);
  EXPECT_EQ(kda, 69);
  EXPECT_EQ(moe, 92);
  EXPECT_FALSE(c.is_kda_layer(91));  // the last two layers are both MLA (spec §1.4)
  EXPECT_FALSE(c.is_kda_layer(92));
  EXPECT_TRUE(c.is_kda_layer(0));
  EXPECT_EQ(c.expert_span_bytes(), 17547264u);  // spec §2.8: 33,030,144 parameters in MXFP4 + scales
}

TEST(K3Config, LayoutOnlySpineHoldsTheSpecsParameters) {
  const Checkpoint ck = layout_checkpoint(k3_config(), "Kimi K3");
  const Spine spine(ck, 64ull << 20);
  uint64_t params = 0;
  for (const PackSource& m : spine.matrix_sources()) params += uint64_t(m.rows) * uint64_t(m.cols);
  // Spec §2.11 per-layer totals less each part's vectors (KDA: 3 conv taps
  // 3x12288x4, dt_bias 12288, o_norm 128, A_log 128; MLA: the two latent
  // norms; MoE: bias 896, latent norm 3584) and less the pinned routers (896 x 7168).
  const uint64_t expected = 69 * (443740416ull - 160000) + 24 * (232196096ull - 2048) + 726663168ull +
                            92 * (189927808ull - 4480 - 896ull * 7168) + 1174405120ull;
  EXPECT_EQ(params, expected);
  // Nothing can be read from it.
  Spine s(ck, 64ull << 20);
  EXPECT_THROW(s.start(std::vector<bool>(size_t(s.piece_count()), true), 0, {}), Error);
}

// docs/k31-spec.md §2.2: K3.1 Pro's spine is K3's plus 24 indexers of
// 7,438,464 matrix parameters less the 128 of k_norm (a vector), and its cache
// 12,288 bytes more per position (§5.1).
TEST(K3Config, K31AddsTheIndexersToTheSpineAndTheCache) {
  const ModelConfig c = k31_config();
  ASSERT_TRUE(c.dsa);
  EXPECT_EQ(c.dsa_layer_count(), 24);
  EXPECT_EQ(c.dsa_topk, 2048);
  EXPECT_EQ(c.cache_bytes_per_position(), k3_config().cache_bytes_per_position() + 12288);
  auto params = [](const ModelConfig& cfg) {
    const Checkpoint ck = layout_checkpoint(cfg, "x");
    const Spine spine(ck, 64ull << 20);
    uint64_t n = 0;
    for (const PackSource& m : spine.matrix_sources()) n += uint64_t(m.rows) * uint64_t(m.cols);
    return n;
  };
  EXPECT_EQ(params(c) - params(k3_config()), 24ull * (7438464 - 128));
}

TEST(K3Config, PlanWithoutWeights) {
  const Checkpoint ck = layout_checkpoint(k3_config(), "Kimi K3");
  const Spine spine(ck, 64ull << 20);
  ModelOptions o;
  o.ram_budget = 64ull << 30;
  const MemoryPlan small = plan_memory(ck, spine, o);
  EXPECT_FALSE(small.spine_resident);
  EXPECT_GT(small.spine_total, 109'000'000'000ull);  // ~110 GB of matrices: no embedding, no routers
  EXPECT_LT(small.spine_total, 111'000'000'000ull);
  EXPECT_GT(small.spine_resident_bytes, 50'000'000'000ull);
  o.ram_budget = 512ull << 30;
  const MemoryPlan big = plan_memory(ck, spine, o);
  EXPECT_TRUE(big.spine_resident);
  EXPECT_GT(big.expert_cache, 300'000'000'000ull);
}

TEST(K3Config, ModelledLosslessPackStreamsRatioOfTheBytes) {
  const Checkpoint ck = layout_checkpoint(k3_config(), "Kimi K3");
  const Spine bf16(ck, 64ull << 20);
  const auto pack = std::make_shared<const Pack>(modelled_pack(bf16.matrix_sources(), SpineFormat::lossless, 0.665));
  const Spine lossless(ck, 64ull << 20, pack);
  double raw = 0, packed = 0, ram_bf16 = 0, ram_lossless = 0;
  for (int i = 0; i < bf16.piece_count(); i++) raw += double(bf16.piece_read_bytes(i)), ram_bf16 += double(bf16.piece_bytes(i));
  for (int i = 0; i < lossless.piece_count(); i++)
    packed += double(lossless.piece_read_bytes(i)), ram_lossless += double(lossless.piece_bytes(i));
  EXPECT_NEAR(packed / raw, 0.665, 0.002);
  EXPECT_NEAR(ram_lossless / ram_bf16, 1.0, 0.002);  // resident pieces hold decoded bf16
  EXPECT_LT(lossless.min_ring_bytes(), bf16.min_ring_bytes());
}

TEST(K3Config, ModelledInt8PackHoldsInt8Rows) {
  const Checkpoint ck = layout_checkpoint(k3_config(), "Kimi K3");
  const Spine bf16(ck, 64ull << 20);
  const auto pack = std::make_shared<const Pack>(modelled_pack(bf16.matrix_sources(), SpineFormat::int8, 0));
  const Spine int8(ck, 64ull << 20, pack);
  double raw = 0, held = 0, int8_held = 0;
  for (int i = 0; i < bf16.piece_count(); i++) raw += double(bf16.piece_bytes(i));
  for (int i = 0; i < int8.piece_count(); i++) {
    held += double(int8.piece_bytes(i));
    if (int8.piece_is_int8(i)) int8_held += double(int8.piece_read_bytes(i));
    EXPECT_FALSE(int8.piece_is_decoded(i));
  }
  // 1.031 bytes per weight, except MLA's kv_b (indexed, kept bf16: ~0.5 % of the spine).
  EXPECT_NEAR(held / raw, 0.52, 0.01);
  EXPECT_GT(int8_held / held, 0.98);
}

}  // namespace
}  // namespace sluice
