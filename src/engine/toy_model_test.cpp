// The engine runs any architecture behind model/model.h: a toy bigram model
// (its logits a table lookup of the last token) generates through a real
// Session and generate(), greedy and speculative, and the tokens follow the
// table. Only model/ and engine/ headers are included: nothing here is K3's.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/error.h"
#include "engine/generate.h"
#include "engine/session.h"
#include "model/model.h"

namespace sluice {
namespace {

constexpr int kVocab = 8;

// The token after t: two cycles of four (0 3 4 7, 1 6 5 2), so an output
// repeats and the drafter finds matches to propose.
int next_of(int t) { return (t * 3 + 3) % kVocab; }

// The state: the tokens fed so far (so rollback has something to cut).
struct BigramState final : StateData {
  std::vector<int> tokens;
  std::unique_ptr<StateData> clone() const override { return std::make_unique<BigramState>(*this); }
  void assign(const StateData& o) override { tokens = static_cast<const BigramState&>(o).tokens; }
  int64_t pos() const override { return int64_t(tokens.size()); }
  uint64_t bytes() const override { return tokens.size() * sizeof(int); }
  void reset() override { tokens.clear(); }
};

struct BigramUndo final : UndoData {
  int64_t pos0 = 0;
  int T = 0;
  int rows() const override { return T; }
  void clear() override { T = 0; }
};

class Bigram final : public Model {
 public:
  Bigram() {
    ck_.dir = "bigram";
    ck_.config.vocab_size = kVocab;
  }
  const Checkpoint& checkpoint() const override { return ck_; }
  const MemoryPlan& plan() const override { return plan_; }
  const Backend* backend() const override { return nullptr; }
  ModelState new_state() const override { return ModelState(std::make_unique<BigramState>()); }

  void forward(ModelState& state, std::span<const int> tokens, Logits which, std::vector<float>* logits,
               ForwardTrace*, ModelUndo* undo) override {
    const ModelRows one[1] = {{&state, tokens, undo}};
    forward_rows(one, which, logits, nullptr);
  }
  void forward_rows(std::span<const ModelRows> seqs, Logits which, std::vector<float>* logits,
                    ForwardTrace*) override {
    passes++;
    if (logits) logits->clear();
    for (const ModelRows& q : seqs) {
      auto& st = static_cast<BigramState&>(*q.state->data());
      if (q.undo) {
        if (!q.undo->data) q.undo->data = std::make_unique<BigramUndo>();
        auto& u = static_cast<BigramUndo&>(*q.undo->data);
        u.pos0 = st.pos(), u.T = int(q.tokens.size());
      }
      st.tokens.insert(st.tokens.end(), q.tokens.begin(), q.tokens.end());
      if (!logits || which == Logits::None) continue;
      const bool all = which == Logits::All && !q.last_only;
      for (size_t t = all ? 0 : q.tokens.size() - 1; t < q.tokens.size(); t++) add_row(q.tokens[t], logits);
    }
  }
  void rollback(ModelState& state, ModelUndo& undo, int keep) override {
    auto& st = static_cast<BigramState&>(*state.data());
    auto* u = static_cast<BigramUndo*>(undo.data.get());
    if (!u || u->T == 0 || st.pos() != u->pos0 + u->T) fail("rollback", "the state has moved");
    st.tokens.resize(size_t(u->pos0 + keep));
    u->T = 0;
    rollbacks++;
  }

  int passes = 0, rollbacks = 0;

 private:
  static void add_row(int token, std::vector<float>* logits) {
    for (int v = 0; v < kVocab; v++) logits->push_back(v == next_of(token) ? 4.0f : float(v) * 0.1f);
  }
  Checkpoint ck_;
  MemoryPlan plan_;
};

std::vector<int> table_walk(int from, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; i++) out.push_back(from = next_of(from));
  return out;
}

TEST(ToyModel, GreedySessionFollowsTheTable) {
  Bigram m;
  Session s(m);
  const std::vector<int> prompt = {1, 6};
  EXPECT_EQ(generate_greedy(s, prompt, 10), table_walk(6, 10));
  EXPECT_EQ(s.state().pos(), 2 + 9);  // the last token sampled is not fed
  EXPECT_EQ(m.passes, 1 + 9);
}

TEST(ToyModel, GenerateWithDraftsGivesTheTableAndRollsBack) {
  Bigram plain_model, drafted_model;
  GenerateOptions opt;
  opt.max_new_tokens = 24;
  opt.sampling.temperature = 0;  // greedy
  auto run = [&](Bigram& m, bool drafts) {
    Session s(m);
    opt.draft.max_tokens = drafts ? 4 : 0;
    std::vector<int> got;
    // "1 6" is followed by 5 0 3 4 here, not the table's 5 2 1 6: drafts
    // made from it are accepted in part and the rest cut back.
    const std::vector<int> prompt = {1, 6, 5, 0, 3, 4, 1, 6};
    const GenerateResult r = generate(s, prompt, opt, nullptr, [&](const TokenEvent& e) {
      got.push_back(e.id);
      return Verdict::go;
    });
    EXPECT_EQ(r.generated_tokens, 24);
    EXPECT_EQ(got, table_walk(6, 24));
    return r;
  };
  const GenerateResult plain = run(plain_model, false);
  const GenerateResult drafted = run(drafted_model, true);
  EXPECT_EQ(plain.draft_proposed, 0);
  EXPECT_GT(drafted.draft_accepted, 0);
  EXPECT_LT(drafted.passes, plain.passes);  // drafts accepted: fewer passes for the same tokens
  EXPECT_LT(drafted.draft_accepted, drafted.draft_proposed);  // some rejected ...
  EXPECT_GT(drafted_model.rollbacks, 0);                        // ... and cut back
}

TEST(ToyModel, SnapshotAndRestoreAreValues) {
  Bigram m;
  Session s(m);
  const std::vector<int> a = {1, 2, 3};
  s.prefill(a);
  const Session::Snapshot snap = s.snapshot();
  s.step(4);
  EXPECT_EQ(s.state().pos(), 4);
  EXPECT_EQ(snap.state.pos(), 3);  // the copy did not move
  s.restore(snap);
  EXPECT_EQ(s.state().pos(), 3);
  EXPECT_EQ(argmax(s.step(6)), next_of(6));
}

}  // namespace
}  // namespace sluice
