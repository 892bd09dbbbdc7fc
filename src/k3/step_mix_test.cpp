// k3/step_mix: a decode step's bytes by kernel and by disk read, on K3's
// shipped layout: what is resident is computed but not read.
#include "k3/step_mix.h"

#include <gtest/gtest.h>

#include "k3/k3_config.h"

namespace sluice {
namespace {

TEST(StepMix, ResidentPiecesAreComputedButNotRead) {
  const Checkpoint ck = layout_checkpoint(k3_config(), "Kimi K3");
  const Spine spine(ck, 64ull << 20);
  const ModelConfig& c = ck.config;
  const size_t n = size_t(spine.piece_count());
  const StepMix all = step_mix(c, spine, std::vector<bool>(n, true));
  const StepMix none = step_mix(c, spine, std::vector<bool>(n, false));
  EXPECT_EQ(all.layers_read + all.head_read, 0.0);
  EXPECT_DOUBLE_EQ(none.layers_read + none.head_read, none.spine_full_read);
  EXPECT_GT(none.head_read, 0.0);
  // What is computed does not depend on where it lives.
  EXPECT_EQ(all.bf16, none.bf16);
  EXPECT_EQ(all.int8, 0.0);
  EXPECT_EQ(none.decoded, 0.0);  // no pack: nothing to decode
  double pieces = 0;
  for (size_t i = 0; i < n; i++) pieces += double(spine.piece_bytes(int(i)));
  EXPECT_EQ(all.moe_layers, 92);  // spec: 93 layers, the first dense
  EXPECT_DOUBLE_EQ(all.bf16, pieces + 92.0 * c.num_experts * c.hidden_size * 2);  // + the routers
  EXPECT_DOUBLE_EQ(all.touched, 92.0 * c.num_experts_per_token);
  EXPECT_DOUBLE_EQ(all.mxfp4, all.touched * double(c.expert_span_bytes()));
  // Half the pieces resident: the other half read.
  std::vector<bool> half(n);
  for (size_t i = 0; i < n; i += 2) half[i] = true;
  const StepMix h = step_mix(c, spine, half);
  double odd = 0;
  for (size_t i = 1; i < n; i += 2) odd += double(spine.piece_read_bytes(int(i)));
  EXPECT_DOUBLE_EQ(h.layers_read + h.head_read, odd);
}

// K3's token boundary: the head, the dense layer 0, layer 1's attention and
// router; nothing of the MoE layers from layer 1's FFN on.
TEST(StepMix, TheTokenBoundaryIsTheHeadAndWhatComesBeforeTheFirstMoeFfn) {
  const Checkpoint ck = layout_checkpoint(k3_config(), "Kimi K3");
  const Spine spine(ck, 64ull << 20);
  const ModelConfig& c = ck.config;
  const std::vector<bool> resident(size_t(spine.piece_count()), true);
  const StepMix b = token_boundary_mix(c, spine, resident);
  double expect = double(c.num_experts) * c.hidden_size * 2;  // layer 1's router
  for (int i = 0; i < spine.piece_count(); i++) {
    const int u = spine.piece_unit(i);
    if (u <= 2 || spine.piece_is_head(i)) expect += double(spine.piece_bytes(i));
  }
  EXPECT_DOUBLE_EQ(b.bf16, expect);
  EXPECT_EQ(b.mxfp4, 0.0);
  const StepMix all = step_mix(c, spine, resident);
  EXPECT_LT(b.bf16, 0.1 * all.bf16);  // one layer of 93, and the head
  EXPECT_GT(b.bf16, 0.0);
}

}  // namespace
}  // namespace sluice
