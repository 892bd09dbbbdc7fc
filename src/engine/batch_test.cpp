// Batch: generations decoded together report, token for token, what each
// reports alone (greedy and seeded sampling, with drafts accepted and
// rejected, prompts prefilled in chunks that ride in the decode passes: one
// pass per step), including ones that join mid-way, one the caller stops and
// one cancelled (it leaves at once);
#include "engine/batch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

#include <nlohmann/json.hpp>

#include "arch/open.h"


namespace sluice {
namespace {

const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny";

Model& fixture() {
  static std::unique_ptr<Model> m = open_model(kFixture + "/model");
  return *m;
}

std::vector<std::vector<int>> fixture_prompts() {
  std::ifstream in(kFixture + "/manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<std::vector<int>> out;
  for (const auto& c : manifest["cases"]) {
    std::ifstream f(kFixture + "/cases/" + c["name"].get<std::string>() + ".json");
    out.push_back(nlohmann::json::parse(f)["tokens"].get<std::vector<int>>());
  }
  return out;
}

// One generation's request: its prompt, options and what drafts it from.
struct Job {
  std::vector<int> prompt;
  float temperature = 0;
  uint64_t seed = 1;
  int max_new = 24;
  int draft_max = 0;
  std::vector<int> past;  // put in its draft store first (empty: none)
  int stop_after = 0;     // the caller answers Verdict::stop to this token (0: never)
  int cancel_after = 0;   // opt.cancelled turns true after this many tokens (0: never)
};

struct Got {
  std::vector<int> ids;
  GenerateResult r;
  bool done = false;
};

struct Running {
  Job job;
  DraftStore store;
  Got got;
  std::atomic<bool> cancel{false};
};

GenerateOptions options(Running& run) {
  GenerateOptions o;
  o.max_new_tokens = run.job.max_new;
  o.sampling.temperature = run.job.temperature;
  o.sampling.seed = run.job.seed;
  o.draft.max_tokens = run.job.draft_max;
  o.prefill_chunk_tokens = 7;  // long prompts take several steps
  o.logprobs = 2;
  if (!run.job.past.empty()) {
    run.store.add(run.job.past);
    o.draft_store = &run.store;
  }
  o.cancelled = [&run] { return run.cancel.load(); };
  return o;
}

Verdict on_token(Running& run, const TokenEvent& e) {
  run.got.ids.push_back(e.id);
  const int n = int(run.got.ids.size());
  if (run.job.cancel_after && n >= run.job.cancel_after) run.cancel = true;
  return run.job.stop_after == n ? Verdict::stop : Verdict::go;
}

Got alone(Model& m, const Job& job) {
  Running run;
  run.job = job;
  Session s(m);
  run.got.r = generate(s, job.prompt, options(run), nullptr, [&](const TokenEvent& e) { return on_token(run, e); });
  return run.got;
}

std::vector<Job> jobs() {
  const auto prompts = fixture_prompts();
  std::vector<Job> out;
  for (size_t i = 0; i < prompts.size(); i++) {
    Job j;
    j.prompt = prompts[i];
    j.seed = 100 + i;
    out.push_back(j);
  }
  // Drafts from an earlier output: the true continuation (accepted), and one
  // with every third token changed (rejected part-way).
  Model& m = fixture();
  for (size_t i : {0u, 2u}) {
    for (float t : {0.0f, 0.8f}) {
      Job j = out[i];
      j.temperature = t;
      j.max_new = 16;
      std::vector<int> past = j.prompt;
      const Got plain = alone(m, j);
      past.insert(past.end(), plain.ids.begin(), plain.ids.end());
      if (t > 0)
        for (size_t k = j.prompt.size() + 2; k < past.size(); k += 3) past[k] = (past[k] + 1) % 512;
      j.past = past;
      j.draft_max = 4;
      out.push_back(j);
    }
  }
  out[1].temperature = 0.8f;
  out[3].stop_after = 5;    // the caller stops it (a stop sequence)
  out[2].cancel_after = 8;  // its client leaves
  return out;
}

TEST(Batch, EachGenerationAsAloneWhileOthersJoinAndLeave) {
  Model& m = fixture();
  const std::vector<Job> js = jobs();
  std::vector<Got> want;
  for (const Job& j : js) want.push_back(alone(m, j));

  PrefixCache* no_cache = nullptr;
  Batch b(m, 3, no_cache);
  std::vector<std::unique_ptr<Running>> runs;
  size_t next = 0;
  int most_sequences = 0, most_rows = 0, steps = 0;
  auto add = [&] {
    auto run = std::make_unique<Running>();
    run->job = js[next++];
    Running& r = *run;
    b.add(r.job.prompt, options(r), [&r](const TokenEvent& e) { return on_token(r, e); },
          [&r, &b](const GenerateResult& res, std::exception_ptr err) {
            EXPECT_FALSE(err);
            r.got.r = res;
            r.got.done = true;
            EXPECT_FALSE(b.full());  // its slot is free already
          });
    runs.push_back(std::move(run));
  };
  add();
  while (next < js.size() || b.active() > 0) {
    // Two start together; the rest join mid-way, as slots free up.
    if (next < js.size() && !b.full() && (next < 2 || steps > 3)) add();
    const Batch::Stats before = b.stats();
    b.step();
    steps++;
    // One pass per step: a joining prompt's chunk rides in the decode pass.
    EXPECT_LE(b.stats().passes + b.stats().prompt_passes, before.passes + before.prompt_passes + 1);
    most_sequences = std::max(most_sequences, b.stats().last_sequences);
    most_rows = std::max(most_rows, b.stats().last_rows);
    ASSERT_LT(steps, 1000);
  }
  EXPECT_EQ(most_sequences, 3);
  EXPECT_GT(b.stats().fused_passes, 2u);  // prompts joined while others decoded
  EXPECT_GT(b.stats().prompt_rows, b.stats().fused_passes);
  EXPECT_GT(most_rows, 3);  // drafts rode along with other sequences' rows
  uint64_t tokens = 0;
  for (size_t i = 0; i < js.size(); i++) {
    SCOPED_TRACE(i);
    const Got& g = runs[i]->got;
    ASSERT_TRUE(g.done);
    EXPECT_EQ(g.ids, want[i].ids);
    EXPECT_EQ(g.r.finish, want[i].r.finish);
    EXPECT_EQ(g.r.generated_tokens, want[i].r.generated_tokens);
    EXPECT_EQ(g.r.draft_proposed, want[i].r.draft_proposed);
    EXPECT_EQ(g.r.draft_accepted, want[i].r.draft_accepted);
    tokens += uint64_t(g.r.generated_tokens);
  }
  EXPECT_EQ(want[2].r.finish, Finish::cancelled);
  EXPECT_EQ(want[3].r.finish, Finish::stop);
  EXPECT_GT(b.stats().draft_accepted, 0u);
  EXPECT_LT(b.stats().draft_accepted, b.stats().draft_proposed);
  // Every token but each one's first (sampled from its prefill) came from a batched pass.
  EXPECT_EQ(b.stats().tokens, tokens - js.size());
}

}  // namespace
}  // namespace sluice
