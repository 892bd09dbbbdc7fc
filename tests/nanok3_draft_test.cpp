// nanoK3 with speculative drafting: greedy tokens identical to plain decoding,
// token for token, over 100 prompts: 50 that quote a heldout passage twice and
// begin it a third time (drafts mostly accepted), 50 of scrambled heldout
// tokens (drafts, where the model repeats itself, often rejected). Short
// generations keep it fast.
#include "arch/open.h"
#include "engine/generate.h"
#include "fixture_util.h"
#include "text/tokenizer.h"

namespace sluice {
namespace {

const std::string kModel = std::string(SLUICE_SOURCE_DIR) + "/models/nanok3";

std::vector<int> greedy(Session& s, const std::vector<int>& prompt, int draft_max, GenerateResult* r) {
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.sampling.temperature = 0;
  o.draft.max_tokens = draft_max;
  std::vector<int> ids;
  *r = generate(s, prompt, o, nullptr, [&](const TokenEvent& e) {
    ids.push_back(e.id);
    return Verdict::go;
  });
  return ids;
}

TEST(NanoK3Draft, GreedyWithDraftsEqualsWithout) {
  auto model = open_model(kModel);
  text::Tokenizer tok = text::Tokenizer::load(kModel);
  const std::vector<int> text = tok.encode(testing::read_text(kModel + "/heldout.txt"), false);
  ASSERT_GT(text.size(), 4000u);
  Session s(*model);
  int prompts = 0, rep_proposed = 0, rep_accepted = 0, free_proposed = 0, free_accepted = 0;
  uint64_t x = 12345;
  auto rnd = [&x](size_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return size_t((x >> 33) % n);
  };
  for (int i = 0; i < 100; i++, prompts++) {
    const bool repetitive = i % 2 == 0;
    std::vector<int> p;
    const size_t at = rnd(text.size() - 64);
    if (repetitive) {
      // A passage twice, then its start again: the model continues the quote.
      for (int r = 0; r < 2; r++) p.insert(p.end(), text.begin() + long(at), text.begin() + long(at + 10));
      p.insert(p.end(), text.begin() + long(at), text.begin() + long(at + 3));
    } else {
      for (int k = 0; k < 14; k++) p.push_back(text[rnd(text.size())]);
    }
    SCOPED_TRACE(i);
    GenerateResult plain, drafted;
    const std::vector<int> want = greedy(s, p, 0, &plain);
    const std::vector<int> got = greedy(s, p, 6, &drafted);
    ASSERT_EQ(got, want);
    (repetitive ? rep_proposed : free_proposed) += drafted.draft_proposed;
    (repetitive ? rep_accepted : free_accepted) += drafted.draft_accepted;
  }
  EXPECT_GE(prompts, 100);
  // Both paths are exercised: drafts accepted (mostly on the quoting
  // prompts) and drafts rejected.
  EXPECT_GT(rep_accepted + free_accepted, 0);
  EXPECT_GT(rep_proposed + free_proposed - rep_accepted - free_accepted, 0);
  std::printf("repetitive: %d/%d drafts accepted; scrambled: %d/%d\n", rep_accepted, rep_proposed, free_accepted,
              free_proposed);
}

}  // namespace
}  // namespace sluice
