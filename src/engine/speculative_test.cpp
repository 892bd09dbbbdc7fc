// Speculative decoding, exactness: Sampler::sample_draft emits exactly the
// sampling distribution (empirically over many seeds, forced rejections and
// acceptances included); a verified chunk cut back to any prefix leaves the
// state bitwise as feeding only that prefix; generate() with drafting gives
// the same tokens as without (greedy, and seeded sampling), with drafts
// accepted and rejected, and leaves the session where a plain run leaves it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "arch/open.h"
#include "base/error.h"
#include "engine/generate.h"
#include "k3/state_test_util.h"

namespace sluice {
namespace {

const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "missing " << path;
  return nlohmann::json::parse(in);
}

// The emitted token's distribution over n seeds matches sampling_distribution
// within 5 standard errors per token, and the acceptance rate matches p(draft).
void check_draft_distribution(const std::vector<float>& logits, SamplingParams p, int draft, int n) {
  std::vector<Candidate> want = sampling_distribution(logits, p);
  std::map<int, double> pw;
  for (const Candidate& c : want) pw[c.id] = c.p;
  std::map<int, int> got;
  int acc_count = 0;
  for (int seed = 0; seed < n; seed++) {
    p.seed = uint64_t(seed) * 7919 + 1;
    Sampler s(p);
    bool acc = false;
    const int t = s.sample_draft(logits, draft, &acc);
    got[t]++;
    if (acc) {
      acc_count++;
      EXPECT_EQ(t, draft);
    } else {
      EXPECT_NE(t, draft);
    }
  }
  for (const auto& [id, count] : got) EXPECT_TRUE(pw.count(id)) << "token " << id << " outside the distribution";
  for (const auto& [id, prob] : pw) {
    const double f = double(got[id]) / n, se = std::sqrt(prob * (1 - prob) / n);
    EXPECT_NEAR(f, prob, 5 * se + 1e-12) << "token " << id << " draft " << draft;
  }
  const double pd = pw.count(draft) ? pw[draft] : 0.0;
  EXPECT_NEAR(double(acc_count) / n, pd, 5 * std::sqrt(pd * (1 - pd) / n) + 1e-12);
}

TEST(SampleDraft, EmitsExactlyTheSamplingDistribution) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.0f, -INFINITY};
  const int n = 20000;
  SamplingParams plain{1.0f, 1.0f, 0, 0};
  for (int d : {1, 3, 4, 6}) check_draft_distribution(logits, plain, d, n);  // likely and unlikely drafts
  check_draft_distribution(logits, plain, 7, n);  // p(draft) = 0: always rejected
  SamplingParams hot{1.7f, 0.9f, 0, 0};
  for (int d : {1, 5}) check_draft_distribution(logits, hot, d, n);
  SamplingParams truncated{0.6f, 1.0f, 3, 0};
  check_draft_distribution(logits, truncated, 3, n);
  check_draft_distribution(logits, truncated, 0, n);  // cut by top-k: forced rejection
  SamplingParams single{1.0f, 0.05f, 0, 0};           // top-p keeps one candidate
  check_draft_distribution(logits, single, 1, 2000);  // forced acceptance
  check_draft_distribution(logits, single, 3, 2000);  // forced rejection
}

TEST(SampleDraft, GreedyAcceptsOnlyTheArgmax) {
  Sampler s(SamplingParams{0.0f, 1.0f, 0, 3});
  const std::vector<float> logits = {0.1f, 3.0f, 3.0f, -2.0f};
  bool acc = false;
  EXPECT_EQ(s.sample_draft(logits, 1, &acc), 1);
  EXPECT_TRUE(acc);
  EXPECT_EQ(s.sample_draft(logits, 2, &acc), 1);  // the tie goes to the lower id
  EXPECT_FALSE(acc);
}

Model& fixture() {
  static std::unique_ptr<Model> m = open_model(kFixture + "/model");
  return *m;
}

TEST(Rollback, AVerifiedChunkCutToAnyPrefixIsThatPrefixFed) {
  Model& m = fixture();
  const std::vector<int> prompt = {448, 259, 309, 412};
  const std::vector<int> chunk = {370, 295, 17, 401, 88, 260};
  for (int keep = 0; keep <= int(chunk.size()); keep++) {
    SCOPED_TRACE(keep);
    Session a(m), b(m);
    a.prefill(prompt);
    b.prefill(prompt);
    const std::vector<float> all = a.verify(chunk);
    a.keep_verified(keep);
    if (keep > 0) {
      const std::vector<float>& want = b.prefill_all(std::span<const int>(chunk).first(size_t(keep)));
      // The kept rows' logits are those of the prefix, bitwise.
      EXPECT_EQ(0, std::memcmp(all.data(), want.data(), want.size() * sizeof(float)));
    }
    expect_same_state(a.state(), b.state());
    EXPECT_EQ(a.tokens(), b.tokens());
    // And the state goes on the same way.
    const std::vector<float> la = a.step(77), lb = b.step(77);
    EXPECT_EQ(la, lb);
  }
}

TEST(Rollback, RefusesAStaleRecord) {
  Session s(fixture());
  s.prefill(std::vector<int>{448, 259});
  s.verify(std::vector<int>{1, 2, 3});
  s.keep_verified(2);
  EXPECT_THROW(s.keep_verified(1), Error);  // consumed
  s.verify(std::vector<int>{4, 5});
  s.step(6);
  EXPECT_THROW(s.keep_verified(1), Error);  // the state moved on
}

std::vector<int> gen(Model& m, std::span<const int> prompt, int max_new, int draft_max, GenerateResult* r = nullptr,
                     float temperature = 0, std::function<Verdict(const TokenEvent&)> verdict = nullptr,
                     Session* session = nullptr, DraftStore* store = nullptr) {
  Session own(m);
  Session& s = session ? *session : own;
  GenerateOptions o;
  o.max_new_tokens = max_new;
  o.sampling.temperature = temperature;
  o.sampling.seed = 5;
  o.draft.max_tokens = draft_max;
  o.draft_store = store;
  std::vector<int> ids;
  GenerateResult res = generate(s, prompt, o, nullptr, [&](const TokenEvent& e) {
    ids.push_back(e.id);
    return verdict ? verdict(e) : Verdict::go;
  });
  if (r) *r = res;
  return ids;
}

struct FixtureCase {
  std::vector<int> tokens, greedy;
};

std::vector<FixtureCase> fixture_cases() {
  std::vector<FixtureCase> out;
  const nlohmann::json manifest = read_json(kFixture + "/manifest.json");
  for (const auto& c : manifest["cases"]) {
    auto j = read_json(kFixture + "/cases/" + c["name"].get<std::string>() + ".json");
    out.push_back({j["tokens"].get<std::vector<int>>(), j["greedy"]["tokens"].get<std::vector<int>>()});
  }
  return out;
}

// The tiny fixture model is random: its output never repeats its prompt, so
// drafts come from a store holding an earlier output (as the server's does):
// the true continuation (every draft accepted), and one with every third
// token changed (drafts rejected part-way).
TEST(SpeculativeGreedy, SameTokensAsWithoutDraftsOnTheFixtureCases) {
  Model& m = fixture();
  int proposed = 0, accepted = 0;
  for (const FixtureCase& k : fixture_cases()) {
    const int n = int(k.greedy.size());
    ASSERT_EQ(gen(m, k.tokens, n, 0), k.greedy);
    std::vector<int> seen = k.tokens, changed;
    seen.insert(seen.end(), k.greedy.begin(), k.greedy.end());
    changed = seen;
    for (size_t i = k.tokens.size() + 2; i < changed.size(); i += 3) changed[i] = (changed[i] + 1) % 512;
    for (const std::vector<int>* past : {&seen, &changed}) {
      for (int dm : {1, 8}) {
        SCOPED_TRACE(dm);
        DraftStore store;
        store.add(*past);
        GenerateResult r;
        EXPECT_EQ(gen(m, k.tokens, n, dm, &r, 0, nullptr, nullptr, &store), k.greedy);
        EXPECT_EQ(r.generated_tokens, n);
        EXPECT_EQ(r.passes + r.draft_accepted, n);  // each pass gives one token beyond the accepted drafts
        if (dm > 0 && past == &seen) {
          EXPECT_EQ(r.draft_accepted, r.draft_proposed);
        }
        if (dm > 0 && past == &changed) {
          EXPECT_LT(r.draft_accepted, r.draft_proposed);
        }
        proposed += r.draft_proposed;
        accepted += r.draft_accepted;
      }
    }
  }
  EXPECT_GT(proposed, 0);
  EXPECT_GT(accepted, 0);
}

TEST(SpeculativeGreedy, EndsWhereAPlainRunEnds) {
  Model& m = fixture();
  const FixtureCase k = fixture_cases()[0];
  std::vector<int> seen = k.tokens;
  seen.insert(seen.end(), k.greedy.begin(), k.greedy.end());
  const std::vector<int> plain = gen(m, k.tokens, 12, 0);
  for (int stop_at : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE(stop_at);
    Session s(m);
    DraftStore store;
    store.add(seen);
    int count = 0;
    GenerateResult r;
    const std::vector<int> got = gen(m, k.tokens, 12, 8, &r, 0, [&](const TokenEvent&) {
      return ++count == stop_at ? Verdict::stop : Verdict::go;
    }, &s, &store);
    ASSERT_EQ(got, std::vector<int>(plain.begin(), plain.begin() + stop_at));
    if (stop_at > 2) {
      EXPECT_GT(r.draft_accepted, 0);
    }
    // The session holds the prompt and every reported token but the last, exactly.
    std::vector<int> fed = k.tokens;
    fed.insert(fed.end(), got.begin(), got.end() - 1);
    EXPECT_EQ(s.tokens(), fed);
    Session fresh(m);
    fresh.prefill(fed);
    expect_same_state(s.state(), fresh.state());
  }
}

TEST(SpeculativeSampling, SeededOutputDoesNotDependOnDrafts) {
  Model& m = fixture();
  for (size_t c = 0; c < 2; c++) {
    const FixtureCase k = fixture_cases()[c];
    const std::vector<int> plain = gen(m, k.tokens, 16, 0, nullptr, 0.8f);
    std::vector<int> seen = k.tokens;
    seen.insert(seen.end(), plain.begin(), plain.end());
    std::vector<int> changed = seen;
    for (size_t i = k.tokens.size() + 2; i < changed.size(); i += 4) changed[i] = (changed[i] + 1) % 512;
    for (const std::vector<int>* past : {&seen, &changed}) {
      DraftStore store;
      store.add(*past);
      GenerateResult r;
      EXPECT_EQ(gen(m, k.tokens, 16, 4, &r, 0.8f, nullptr, nullptr, &store), plain);
      EXPECT_GT(r.draft_accepted, 0);
      if (past == &changed) {
        EXPECT_LT(r.draft_accepted, r.draft_proposed);
      }
    }
  }
}

}  // namespace
}  // namespace sluice
