// The golden fixture (tests/fixtures/k3-tiny, a byte-identical copy of
// shared/fixtures/k3-tiny): logits at every position, per-layer outputs,
// routed experts and greedy continuations from an independent implementation.
// A mismatch here is a bug in sluice.
#include <openssl/sha.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "arch/open.h"
#include "engine/session.h"
#include "fixture_util.h"

namespace sluice {
namespace {

using testing::fixture_dir;
using testing::fixture_model;
using testing::read_array;
using testing::read_json;

constexpr float kLogitTol = 1e-3f;

struct Case {
  std::string name;
  std::vector<int> tokens, greedy;
};

std::vector<Case> load_cases() {
  std::vector<Case> out;
  const nlohmann::json manifest = read_json(fixture_dir() + "/manifest.json");
  for (const auto& c : manifest["cases"]) {
    Case k;
    k.name = c["name"];
    auto j = read_json(fixture_dir() + "/cases/" + k.name + ".json");
    k.tokens = j["tokens"].get<std::vector<int>>();
    k.greedy = j["greedy"]["tokens"].get<std::vector<int>>();
    out.push_back(k);
  }
  return out;
}

Model& fixture() {
  static std::unique_ptr<Model> m = open_model(fixture_model());
  return *m;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float d = 0;
  for (size_t i = 0; i < n; i++) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

int argmax_row(const float* p, int n) { return int(std::max_element(p, p + n) - p); }

TEST(Fixture, FilesMatchManifest) {
  auto man = read_json(fixture_dir() + "/manifest.json");
  for (auto it = man["model_files"].begin(); it != man["model_files"].end(); ++it) {
    std::string bytes = testing::read_text(fixture_model() + "/" + it.key());
    ASSERT_EQ(bytes.size(), (*it)["bytes"].get<size_t>()) << it.key();
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), md);
    char hex[65];
    for (int i = 0; i < 32; i++) std::snprintf(hex + 2 * i, 3, "%02x", md[i]);
    EXPECT_EQ(std::string(hex), (*it)["sha256"].get<std::string>()) << it.key();
  }
  EXPECT_EQ(load_cases().size(), 4u);
}

// Prefill: logits, argmax, per-layer outputs and expert sets at every position.
TEST(Fixture, PrefillMatchesGolden) {
  Model& m = fixture();
  const ModelConfig& c = m.config();
  const int V = c.vocab_size, H = c.hidden_size, K = c.num_experts_per_token;
  const int moe_layers = c.num_hidden_layers - c.first_k_dense_replace;
  for (const Case& k : load_cases()) {
    SCOPED_TRACE(k.name);
    const int T = int(k.tokens.size());
    auto gold = read_array<float>(fixture_dir() + "/cases/" + k.name + ".logits.f32");
    auto hidden = read_array<float>(fixture_dir() + "/cases/" + k.name + ".hidden.f32");
    auto experts = read_array<int32_t>(fixture_dir() + "/cases/" + k.name + ".experts.i32");
    ASSERT_EQ(gold.size(), size_t(T) * V);
    ASSERT_EQ(experts.size(), size_t(moe_layers) * T * K);
    ASSERT_EQ(hidden.size(), size_t(c.num_hidden_layers) * T * H);

    ModelState st = m.new_state();
    std::vector<float> logits;
    ForwardTrace trace;
    m.forward(st, k.tokens, Logits::All, &logits, &trace);
    ASSERT_EQ(logits.size(), gold.size());
    for (int t = 0; t < T; t++) {
      const float* a = logits.data() + size_t(t) * V;
      const float* b = gold.data() + size_t(t) * V;
      ASSERT_LE(max_abs_diff(a, b, size_t(V)), kLogitTol) << "position " << t;
      ASSERT_EQ(argmax_row(a, V), argmax_row(b, V)) << "position " << t;
    }
    for (int l = 0; l < c.num_hidden_layers; l++)
      EXPECT_LE(max_abs_diff(trace.hidden.data() + size_t(l) * T * H, hidden.data() + size_t(l) * T * H,
                             size_t(T) * H),
                1e-3f)
          << "layer " << l;
    ASSERT_EQ(trace.experts.size(), experts.size());
    for (int l = 0; l < moe_layers; l++)
      for (int t = 0; t < T; t++) {
        size_t at = (size_t(l) * T + t) * K;
        std::set<int> ours(trace.experts.begin() + ptrdiff_t(at), trace.experts.begin() + ptrdiff_t(at + K));
        std::set<int> theirs(experts.begin() + ptrdiff_t(at), experts.begin() + ptrdiff_t(at + K));
        ASSERT_EQ(ours, theirs) << "moe layer " << l << " position " << t;
      }
  }
}

// One token at a time gives the same logits as the golden prefill.
TEST(Fixture, StepMatchesGolden) {
  Model& m = fixture();
  const int V = m.config().vocab_size;
  for (const Case& k : load_cases()) {
    SCOPED_TRACE(k.name);
    auto gold = read_array<float>(fixture_dir() + "/cases/" + k.name + ".logits.f32");
    Session s(m);
    for (size_t t = 0; t < k.tokens.size(); t++) {
      const std::vector<float>& l = s.step(k.tokens[t]);
      ASSERT_LE(max_abs_diff(l.data(), gold.data() + t * V, size_t(V)), kLogitTol) << "position " << t;
      ASSERT_EQ(argmax_row(l.data(), V), argmax_row(gold.data() + t * V, V)) << "position " << t;
    }
  }
}

// Greedy continuation: the 16 tokens, and the logits after each one.
TEST(Fixture, GreedyMatchesGolden) {
  Model& m = fixture();
  const int V = m.config().vocab_size;
  for (const Case& k : load_cases()) {
    SCOPED_TRACE(k.name);
    auto gold = read_array<float>(fixture_dir() + "/cases/" + k.name + ".greedy_logits.f32");
    Session s(m);
    std::vector<int> got = generate_greedy(s, k.tokens, int(k.greedy.size()));
    EXPECT_EQ(got, k.greedy);
    // Row i: logits after feeding greedy token i.
    Session r(m);
    r.prefill(k.tokens);
    for (size_t i = 0; i < k.greedy.size(); i++) {
      const std::vector<float>& l = r.step(k.greedy[i]);
      ASSERT_LE(max_abs_diff(l.data(), gold.data() + i * V, size_t(V)), kLogitTol) << "greedy row " << i;
    }
  }
}

}  // namespace
}  // namespace sluice
