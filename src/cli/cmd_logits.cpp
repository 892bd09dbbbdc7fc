// sluice logits — dump the logits at every position of given tokens.
//   sluice logits --model DIR --tokens 448,259,309 --out FILE [--mode prefill|step]
// FILE: float32 little-endian, row-major [n_tokens][vocab_size].
#include <cstdio>
#include <string>

#include "base/atomic_file.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/expert_stats.h"
#include "cli/model_args.h"
#include "cli/token_list.h"
#include "engine/session.h"

namespace sluice::cli {
namespace {

struct LogitsArgs {
  ModelArgs m;
  std::string tokens, out, mode = "prefill";
  bool stats = false;
};

int run_logits(const LogitsArgs& a) {
  std::vector<int> ids = parse_token_list(a.tokens, "--tokens");
  ModelOptions mo = model_options(a.m);
  mo.chunk_tokens = int(ids.size());  // step mode computes less, but keeps every position's logits too
  mo.all_logits = true;
  auto model = open_model(a.m.dir, mo);
  const int V = model->config().vocab_size;
  for (int id : ids)
    if (id < 0 || id >= V) fail("--tokens", "token id " + std::to_string(id) + " is outside the vocabulary (" +
                                                std::to_string(V) + ")");
  Session s(*model);
  std::vector<float> all;
  if (a.mode == "prefill") {
    all = s.prefill_all(ids);
  } else {
    for (int id : ids) {
      const std::vector<float>& l = s.step(id);
      all.insert(all.end(), l.begin(), l.end());
    }
  }
  write_file_atomic(a.out, std::string_view(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(float)));
  if (a.stats) std::fprintf(stderr, "%s\n", expert_stats_json(*model, int(ids.size())).c_str());
  return 0;
}

Command reg("logits", "Write the logits at every position of the given tokens (f32 LE, [n][vocab])",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<LogitsArgs>();
              add_model_options(sub, a->m);
              sub.add_option("--tokens", a->tokens, "Token ids, e.g. 448,259,309")->required();
              sub.add_option("--out", a->out, "Output file")->required();
              sub.add_option("--mode", a->mode, "prefill (one batch) or step (one token at a time)")
                  ->check(CLI::IsMember({"prefill", "step"}));
              sub.add_flag("--stats", a->stats, "Print where expert bytes came from (JSON on stderr)");
              *action = [a] { return run_logits(*a); };
            });

}  // namespace
}  // namespace sluice::cli
