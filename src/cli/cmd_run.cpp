// sluice run — generate a continuation.
//   sluice run --model DIR --tokens 448,259,309 --max-new 16 --ids
// prints the greedy token ids, space-separated, on one line of stdout.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/expert_stats.h"
#include "cli/token_list.h"
#include "engine/session.h"

namespace sluice::cli {
namespace {

struct RunArgs {
  std::string model, tokens, ram_budget;
  int max_new = 16;
  bool ids = false;
  bool stats = false;
};

int run_run(const RunArgs& a) {
  if (a.tokens.empty()) fail("run", "give the prompt as --tokens");
  std::vector<int> prompt = parse_token_list(a.tokens, "--tokens");
  ModelOptions opt;
  if (!a.ram_budget.empty()) opt.ram_budget = parse_byte_size(a.ram_budget, "--ram-budget");
  auto model = open_model(a.model, opt);
  Session s(*model);
  std::vector<int> out = generate_greedy(s, prompt, a.max_new);
  std::string line;
  for (size_t i = 0; i < out.size(); i++) line += (i ? " " : "") + std::to_string(out[i]);
  std::printf("%s\n", line.c_str());
  if (a.stats) std::fprintf(stderr, "%s\n", expert_stats_json(*model, int(prompt.size() + out.size())).c_str());
  return 0;
}

Command reg("run", "Generate a continuation of a prompt", [](CLI::App& sub, Action* action) {
  auto a = std::make_shared<RunArgs>();
  sub.add_option("--model", a->model, "Model directory")->required();
  sub.add_option("--ram-budget", a->ram_budget, "RAM the engine may use, e.g. 2M, 16G (default: 3/4 of RAM)");
  sub.add_option("--tokens", a->tokens, "Prompt as token ids, e.g. 448,259,309");
  sub.add_option("--max-new", a->max_new, "Tokens to generate")->check(CLI::NonNegativeNumber);
  sub.add_flag("--ids", a->ids, "Print generated token ids (space-separated) instead of text");
  sub.add_flag("--stats", a->stats, "Print where expert bytes came from (JSON on stderr)");
  *action = [a] { return run_run(*a); };
});

}  // namespace
}  // namespace sluice::cli
