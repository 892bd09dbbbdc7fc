// generate(): greedy equals generate_greedy, stop ids / max tokens / verdicts /
// cancellation end it as documented, logprobs are the raw log-softmax, and a
// resumed prefix gives exactly the tokens a fresh session gives while computing
// fewer prompt tokens (and fetching fewer expert spans). StopMatcher on text.
#include "engine/generate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "arch/open.h"
#include "base/error.h"
#include "k3/k3_model.h"

namespace sluice {
namespace {

std::string fixture_model() { return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model"; }

struct Collected {
  std::vector<int> ids;
  std::vector<TokenEvent> events;
};

GenerateResult run(Session& s, std::span<const int> prompt, const GenerateOptions& o, PrefixCache* cache,
                   Collected* out, std::function<Verdict(const TokenEvent&)> verdict = nullptr) {
  return generate(s, prompt, o, cache, [&](const TokenEvent& e) {
    out->ids.push_back(e.id);
    out->events.push_back(e);
    return verdict ? verdict(e) : Verdict::go;
  });
}

class Generate : public ::testing::Test {
 protected:
  void SetUp() override { model = open_model(fixture_model()); }
  std::unique_ptr<Model> model;
  const std::vector<int> prompt = {448, 259, 309, 412, 370, 295};
};

TEST_F(Generate, GreedyMatchesGenerateGreedy) {
  Session ref(*model);
  std::vector<int> want = generate_greedy(ref, prompt, 12);
  Session s(*model);
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 0;
  Collected got;
  GenerateResult r = run(s, prompt, o, nullptr, &got);
  EXPECT_EQ(got.ids, want);
  EXPECT_EQ(r.finish, Finish::length);
  EXPECT_EQ(r.generated_tokens, 12);
  EXPECT_EQ(r.prompt_tokens, int(prompt.size()));
  EXPECT_EQ(r.cached_tokens, 0);
  // The session holds the prompt and every token fed back (not the last one).
  EXPECT_EQ(s.tokens().size(), prompt.size() + 11);
}

TEST_F(Generate, StopIdVerdictAndCancellationEndIt) {
  Session ref(*model);
  std::vector<int> greedy = generate_greedy(ref, prompt, 8);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.sampling.temperature = 0;
  o.stop_ids = {greedy[3]};
  Session s(*model);
  Collected a;
  GenerateResult r = run(s, prompt, o, nullptr, &a);
  // Ends at the first occurrence of the stop id, which is reported.
  size_t first = size_t(std::find(greedy.begin(), greedy.end(), greedy[3]) - greedy.begin());
  EXPECT_EQ(a.ids, std::vector<int>(greedy.begin(), greedy.begin() + long(first) + 1));
  EXPECT_TRUE(a.events.back().is_stop_id);
  EXPECT_EQ(r.finish, Finish::stop);

  o.stop_ids.clear();
  Collected b;
  r = run(s, prompt, o, nullptr, &b, [&](const TokenEvent&) { return b.ids.size() == 2 ? Verdict::stop : Verdict::go; });
  EXPECT_EQ(b.ids.size(), 2u);
  EXPECT_EQ(r.finish, Finish::stop);

  Collected c;
  r = run(s, prompt, o, nullptr, &c, [&](const TokenEvent&) { return c.ids.size() == 3 ? Verdict::cancel : Verdict::go; });
  EXPECT_EQ(c.ids.size(), 3u);
  EXPECT_EQ(r.finish, Finish::cancelled);

  int polls = 0;
  o.cancelled = [&] { return ++polls > 3; };  // before prefill, then before steps
  Collected d;
  r = run(s, prompt, o, nullptr, &d);
  EXPECT_EQ(r.finish, Finish::cancelled);
  EXPECT_EQ(d.ids.size(), 3u);

  o.cancelled = [] { return true; };
  Collected e;
  r = run(s, prompt, o, nullptr, &e);
  EXPECT_EQ(r.finish, Finish::cancelled);
  EXPECT_TRUE(e.ids.empty());
}

TEST_F(Generate, ChunkedPrefillReportsProgressAndStopsWithinOneChunk) {
  const std::vector<int> long_prompt = {448, 259, 309, 412, 370, 295, 448, 259, 309, 412, 370};
  Session ref(*model);
  std::vector<int> want = generate_greedy(ref, long_prompt, 6);
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.sampling.temperature = 0;
  o.prefill_chunk_tokens = 3;
  std::vector<size_t> seen;
  o.prefill_progress = [&](size_t done, size_t total) {
    EXPECT_EQ(total, long_prompt.size());
    seen.push_back(done);
  };
  Session s(*model);
  Collected got;
  run(s, long_prompt, o, nullptr, &got);
  EXPECT_EQ(got.ids, want);  // chunks of 3 give what one chunk gives
  EXPECT_EQ(seen, (std::vector<size_t>{0, 3, 6, 9, 11}));

  // Cancelled after the second chunk: no token, and no further chunk computed.
  bool cancel = false;
  o.cancelled = [&] { return cancel; };
  o.prefill_progress = [&](size_t done, size_t) { cancel = done >= 6; };
  Session c(*model);
  Collected none;
  GenerateResult r = run(c, long_prompt, o, nullptr, &none);
  EXPECT_EQ(r.finish, Finish::cancelled);
  EXPECT_TRUE(none.ids.empty());
  EXPECT_EQ(c.tokens().size(), 6u);
}

TEST_F(Generate, LogprobsAreTheRawLogSoftmax) {
  Session ref(*model);
  std::vector<float> logits = ref.prefill(prompt);
  std::vector<float> lp;
  log_softmax(logits, lp);
  GenerateOptions o;
  o.max_new_tokens = 1;
  o.sampling = {1.7f, 0.9f, 5, 3};  // sampling settings do not change logprobs
  o.logprobs = 4;
  Session s(*model);
  Collected got;
  run(s, prompt, o, nullptr, &got);
  ASSERT_EQ(got.events.size(), 1u);
  const TokenEvent& e = got.events[0];
  EXPECT_EQ(e.logprob, lp[size_t(e.id)]);
  ASSERT_EQ(e.top.size(), 4u);
  auto want = top_logprobs(lp, 4);
  for (size_t i = 0; i < 4; i++) {
    EXPECT_EQ(e.top[i].id, want[i].id);
    EXPECT_EQ(e.top[i].logprob, want[i].logprob);
  }
}

TEST_F(Generate, SeededSamplingIsReproducible) {
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.sampling = {1.0f, 0.95f, 0, 1234};
  Session s(*model);
  Collected a, b, c;
  run(s, prompt, o, nullptr, &a);
  run(s, prompt, o, nullptr, &b);
  o.sampling.seed = 99;
  run(s, prompt, o, nullptr, &c);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_NE(a.ids, c.ids);
}

TEST_F(Generate, PrefixCacheResumesExactly) {
  // Expert spans handed to the MoE: what a resumed prefix saves.
  auto fetched = [&] { return k3_parts(*model).experts->stats().fetched; };
  PrefixCache cache(64ull << 20);
  GenerateOptions o;
  o.max_new_tokens = 5;
  o.sampling.temperature = 0;

  Session s(*model);
  Collected first;
  GenerateResult r1 = run(s, prompt, o, &cache, &first);
  EXPECT_EQ(r1.cached_tokens, 0);
  EXPECT_EQ(cache.entries(), 2u);  // prompt end and final state
  EXPECT_LE(cache.bytes(), cache.budget());

  // A second turn: the first prompt, its reply, and more.
  std::vector<int> turn2 = prompt;
  turn2.insert(turn2.end(), first.ids.begin(), first.ids.end());
  turn2.insert(turn2.end(), {300, 301, 302});
  auto check_turn2 = [&](Session& sess, int want_cached) {
    uint64_t before = fetched();
    Collected got;
    GenerateResult r = run(sess, turn2, o, &cache, &got);
    uint64_t cached_spans = fetched() - before;
    EXPECT_EQ(r.cached_tokens, want_cached);
    Session fresh(*model);
    Collected ref;
    before = fetched();
    run(fresh, turn2, o, nullptr, &ref);
    uint64_t fresh_spans = fetched() - before;
    EXPECT_EQ(got.ids, ref.ids);
    EXPECT_LT(cached_spans, fresh_spans);
  };
  // The live session holds prompt + 4 fed tokens; the final snapshot has the same.
  check_turn2(s, int(prompt.size()) + 4);
  // From another session: comes from the saved final state.
  Session other(*model);
  cache.save(other, {});  // empty sessions are not saved
  EXPECT_EQ(cache.entries(), 4u);
  check_turn2(other, int(turn2.size()));  // turn2's own prompt end was saved with its logits

  // Identical prompt again: nothing to compute, the saved logits are sampled.
  Session third(*model);
  Collected again;
  GenerateResult r3 = run(third, prompt, o, &cache, &again);
  EXPECT_EQ(r3.cached_tokens, int(prompt.size()));
  EXPECT_EQ(again.ids, first.ids);

  // A different prompt shares nothing: fresh start, same as without a cache.
  std::vector<int> other_prompt = {7, 8, 9};
  Collected x, y;
  GenerateResult r4 = run(third, other_prompt, o, &cache, &x);
  EXPECT_EQ(r4.cached_tokens, 0);
  Session fresh(*model);
  run(fresh, other_prompt, o, nullptr, &y);
  EXPECT_EQ(x.ids, y.ids);
}

TEST_F(Generate, PrefixCacheStaysWithinItsBudget) {
  auto size = [](const Session& x) { return x.state().bytes() + x.tokens().size() * sizeof(int); };
  std::vector<int> p1 = prompt, p2 = prompt, p3 = prompt;
  p2.push_back(5);
  p3.insert(p3.end(), {5, 6});
  Session s1(*model), s2(*model), s3(*model);
  s1.prefill(p1);
  s2.prefill(p2);
  s3.prefill(p3);
  PrefixCache none(size(s1) - 1);
  none.save(s1, {});
  EXPECT_EQ(none.entries(), 0u);
  PrefixCache two(size(s2) + size(s3));
  two.save(s1, {});
  two.save(s2, {});
  two.save(s3, {});  // evicts the oldest
  EXPECT_EQ(two.entries(), 2u);
  EXPECT_EQ(two.bytes(), two.budget());
  Session t(*model);
  std::vector<int> longer = p3;
  longer.push_back(7);
  std::vector<float> logits;
  EXPECT_EQ(two.resume(t, longer, &logits), p3.size());
  EXPECT_EQ(t.tokens(), p3);
  std::vector<int> other = prompt;
  other.push_back(9);
  EXPECT_EQ(two.resume(t, other, &logits), 0u);  // the prompt-only entry was evicted
  EXPECT_TRUE(t.tokens().empty());
}

TEST(StopMatcher, HoldsBackPrefixesAndNeverLeaks) {
  StopMatcher m({"END", "\n\n"});
  EXPECT_EQ(m.push("hello E"), "hello ");
  EXPECT_EQ(m.held(), "E");
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("X"), "ENX");  // not a stop after all
  EXPECT_EQ(m.push("ab\n"), "ab");
  EXPECT_EQ(m.push("\nrest"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, EarliestMatchWinsAndAcrossManyPieces) {
  StopMatcher m({"cde", "bc"});
  std::string out;
  for (char c : std::string("abcdef")) out += m.push(std::string(1, c));
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(m.matched());

  StopMatcher overlap({"aab"});
  EXPECT_EQ(overlap.push("xaaa"), "xa");  // "aa" might still begin "aab"
  EXPECT_EQ(overlap.push("b!"), "");  // "xa" + "aab"
  EXPECT_TRUE(overlap.matched());

  StopMatcher none({"zz"});
  EXPECT_EQ(none.push("abz"), "ab");
  EXPECT_EQ(none.flush(), "z");
  EXPECT_FALSE(none.matched());

  StopMatcher empty({""});  // empty sequences are ignored
  EXPECT_EQ(empty.push("abc"), "abc");

  StopMatcher utf8({"é!"});
  EXPECT_EQ(utf8.push("caf\xc3\xa9"), "caf");
  EXPECT_EQ(utf8.push("!"), "");
  EXPECT_TRUE(utf8.matched());
}

}  // namespace
}  // namespace sluice
