// nanoK3 (models/nanok3), the bundled model: sluice agrees with the trainer
// that produced it (numbers exported in models/nanok3/reference.json by
// train/make_reference.py from its own forward pass on the exported weights).
#include <cmath>
#include <fstream>
#include <sstream>

#include "arch/open.h"
#include "engine/perplexity.h"
#include "engine/session.h"
#include "fixture_util.h"
#include "text/tokenizer.h"

namespace sluice {
namespace {

const std::string kModel = std::string(SLUICE_SOURCE_DIR) + "/models/nanok3";

nlohmann::json reference() { return testing::read_json(kModel + "/reference.json"); }

Model& nanok3() {
  static std::unique_ptr<Model> m = open_model(kModel);
  return *m;
}

TEST(NanoK3, TokenizerGivesTheReferenceIds) {
  const nlohmann::json ref = reference();
  text::Tokenizer tok = text::Tokenizer::load(kModel);
  std::vector<int> ids = tok.encode(testing::read_text(kModel + "/heldout.txt"), false);
  auto want = ref["perplexity"]["token_ids"].get<std::vector<int>>();
  ASSERT_GE(ids.size(), want.size());
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + ptrdiff_t(want.size())), want);
  for (const auto& c : ref["greedy"]["cases"])
    EXPECT_EQ(tok.encode(c["prompt"].get<std::string>(), false), c["prompt_ids"].get<std::vector<int>>());
}

TEST(NanoK3, PerplexityMatchesTrainer) {
  const nlohmann::json ref = reference();
  auto ids = ref["perplexity"]["token_ids"].get<std::vector<int>>();
  PerplexityResult r = perplexity(nanok3(), ids, int(ids.size()));
  const double want = ref["perplexity"]["perplexity"].get<double>();
  EXPECT_EQ(r.predicted, ref["perplexity"]["n_predicted"].get<long>());
  EXPECT_LE(std::fabs(r.perplexity / want - 1.0), 0.005) << "sluice " << r.perplexity << " trainer " << want;
}

TEST(NanoK3, GreedyMatchesTrainer) {
  const nlohmann::json ref = reference();
  for (const auto& c : ref["greedy"]["cases"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    Session s(nanok3());
    auto prompt = c["prompt_ids"].get<std::vector<int>>();
    auto want = c["greedy_ids"].get<std::vector<int>>();
    EXPECT_EQ(generate_greedy(s, prompt, int(want.size())), want);
  }
}

TEST(NanoK3, LastLogitsMatchTrainer) {
  const nlohmann::json ref = reference()["last_logits"];
  Session s(nanok3());
  const std::vector<float>& l = s.prefill(ref["prompt_ids"].get<std::vector<int>>());
  auto want = ref["first_32"].get<std::vector<float>>();
  for (size_t i = 0; i < want.size(); i++) EXPECT_NEAR(l[i], want[i], 1e-3) << "logit " << i;
  EXPECT_EQ(argmax(l), ref["argmax"].get<int>());
}

}  // namespace
}  // namespace sluice
