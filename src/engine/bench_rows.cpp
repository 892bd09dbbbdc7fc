#include "engine/bench_rows.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "base/error.h"
#include "base/stats.h"
#include "arch/open.h"
#include "engine/batch.h"

namespace sluice {

nlohmann::json run_rows_bench(const std::string& dir, const RowsBenchOptions& opt) {
  if (opt.sequences.empty()) fail("bench", "--rows needs at least one count");
  if (opt.prompt_tokens < 1 || opt.decode_tokens < 2) fail("bench", "--prompt-tokens >= 1 and --decode >= 2");
  int most = 1;
  for (int r : opt.sequences) {
    if (r < 1) fail("bench", "--rows counts must be >= 1");
    most = std::max(most, r);
  }
  ModelOptions mo = opt.model;
  mo.saved_states = std::max(mo.saved_states, most - 1);  // the R live states live in the budget
  plan_batch_passes(mo, most, opt.draft_max, std::min(opt.prefill_chunk_tokens, opt.prompt_tokens));
  auto m = open_model(dir, mo);
  const ModelConfig& c = m->config();
  const int ordinary = std::max(1, std::min(c.vocab_size, c.bos_token_id > 0 ? c.bos_token_id : c.vocab_size));
  std::mt19937_64 rng(opt.seed);
  auto prompt = [&] {
    std::vector<int> p(size_t(opt.prompt_tokens));
    const size_t period = opt.repetitive ? size_t(std::max(4, opt.prompt_tokens / 3)) : p.size();
    for (size_t i = 0; i < p.size(); i++) p[i] = i < period ? int(rng() % uint64_t(ordinary)) : p[i - period];
    return p;
  };

  nlohmann::json runs = nlohmann::json::array();
  double one_pass = 0, one_bytes_per_token = 0, one_tok_s = 0;
  for (int R : opt.sequences) {
    Batch b(*m, R, nullptr);
    // The generations run until enough passes over all R were timed (the
    // first ones decode while the later ones are still prefilling).
    bool enough = false;
    GenerateOptions go;
    go.max_new_tokens = 1 << 30;
    go.cancelled = [&enough] { return enough; };
    go.draft.max_tokens = opt.draft_max;
    go.prefill_chunk_tokens = opt.prefill_chunk_tokens;
    for (int i = 0; i < R; i++)
      b.add(prompt(), go, [](const TokenEvent&) { return Verdict::go; }, [](const GenerateResult&, std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
    std::vector<double> pass_s;
    double secs = 0;
    uint64_t rows = 0, tokens = 0, bytes = 0, proposed = 0, accepted = 0;
    bool first = true;
    while (b.active() > 0) {
      const bool timed = b.prefilling() == 0 && b.active() == R;
      const Batch::Stats before = b.stats();
      const uint64_t bytes0 = model_bytes_read(*m);
      const auto t0 = std::chrono::steady_clock::now();
      b.step();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const Batch::Stats& after = b.stats();
      if (!timed || after.passes == before.passes || after.last_sequences != R) continue;
      if (first) {  // warm-up
        first = false;
        continue;
      }
      pass_s.push_back(s);
      secs += s;
      rows += uint64_t(after.last_rows);
      tokens += after.tokens - before.tokens;
      bytes += model_bytes_read(*m) - bytes0;
      proposed += after.draft_proposed - before.draft_proposed;
      accepted += after.draft_accepted - before.draft_accepted;
      enough = int(pass_s.size()) >= opt.decode_tokens;
    }
    const double n = double(pass_s.size());
    nlohmann::json j;
    j["sequences"] = R;
    j["passes_timed"] = pass_s.size();
    j["pass_s"] = median(pass_s);
    j["rows_per_pass"] = n > 0 ? double(rows) / n : 0.0;
    j["tokens_per_pass"] = n > 0 ? double(tokens) / n : 0.0;
    j["draft_acceptance"] = proposed ? double(accepted) / double(proposed) : 0.0;
    j["bytes_per_pass"] = n > 0 ? double(bytes) / n : 0.0;
    j["bytes_per_token"] = tokens ? double(bytes) / double(tokens) : 0.0;
    j["tokens_per_s"] = secs > 0 ? double(tokens) / secs : 0.0;
    if (R == opt.sequences.front() && R == 1) {
      one_pass = j["pass_s"], one_bytes_per_token = j["bytes_per_token"], one_tok_s = j["tokens_per_s"];
    }
    if (one_pass > 0) {
      j["vs_one_row"] = {{"pass_s", j["pass_s"].get<double>() / one_pass},
                         {"bytes_per_token", one_bytes_per_token > 0 ? j["bytes_per_token"].get<double>() / one_bytes_per_token : 0.0},
                         {"tokens_per_s", one_tok_s > 0 ? j["tokens_per_s"].get<double>() / one_tok_s : 0.0}};
    }
    runs.push_back(j);
  }
  nlohmann::json out;
  out["model"] = dir;
  out["ram_budget"] = m->plan().budget;
  out["spine_resident"] = m->plan().spine_resident;
  out["prompt_tokens"] = opt.prompt_tokens;
  out["decode_tokens"] = opt.decode_tokens;
  out["draft_max"] = opt.draft_max;
  out["repetitive"] = opt.repetitive;
  out["rows"] = runs;
  return out;
}

}  // namespace sluice
