// routing_trace: the router's choices re-laid token-major, exactly as the
// forward pass made them.
#include "engine/routing_trace.h"

#include <gtest/gtest.h>

#include "arch/open.h"

namespace sluice {
namespace {

// The trace holds, token-major, the experts one forward pass over `toks` chose.
void expect_choices_of_one_pass(Model& m, const std::vector<int>& toks, const RoutingTrace& tr) {
  const ModelConfig& c = m.config();
  const int L = c.num_hidden_layers - c.first_k_dense_replace, K = c.num_experts_per_token, T = int(toks.size());
  ModelState st = m.new_state();
  ForwardTrace ft;
  m.forward(st, toks, Logits::None, nullptr, &ft);
  for (int l = 0; l < L; l++)
    for (int t = 0; t < T; t++)
      for (int k = 0; k < K; k++)
        ASSERT_EQ(tr.experts[size_t((t * L + l) * K + k)], ft.experts[size_t((l * T + t) * K + k)]) << l << " " << t;
}

TEST(RoutingTrace, HoldsTheForwardPassChoicesTokenMajor) {
  auto m = open_model(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  std::vector<int> toks;
  for (int i = 0; i < 20; i++) toks.push_back((i * 53 + 7) % 448);
  RoutingTrace tr = routing_trace(*m, toks, 64);
  ASSERT_EQ(tr.tokens(), toks.size());
  expect_choices_of_one_pass(*m, toks, tr);
  // Chunks start fresh sequences: the first chunk's choices do not depend on what follows.
  RoutingTrace two = routing_trace(*m, toks, 10);
  const size_t per_token = tr.experts.size() / toks.size();  // MoE layers x experts a token
  EXPECT_TRUE(std::equal(two.experts.begin(), two.experts.begin() + 10 * per_token, routing_trace(*m, std::span<const int>(toks).first(10), 10).experts.begin()));
}

// A long chunk is fed in pieces (progress after each); the choices are the
// ones one forward pass over the whole chunk makes.
TEST(RoutingTrace, PiecesOfALongChunkMatchOnePassAndReportProgress) {
  auto m = open_model(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  std::vector<int> toks;
  for (int i = 0; i < 150; i++) toks.push_back((i * 31 + 5) % 448);
  std::vector<size_t> seen;
  RoutingTrace tr = routing_trace(*m, toks, 200, [&](size_t done, size_t total) {
    EXPECT_EQ(total, toks.size());
    seen.push_back(done);
  });
  EXPECT_EQ(seen, (std::vector<size_t>{0, 64, 128, 150}));
  expect_choices_of_one_pass(*m, toks, tr);
}

}  // namespace
}  // namespace sluice
