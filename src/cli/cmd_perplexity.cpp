// sluice perplexity — how well the model predicts a text file.
//   sluice perplexity --model DIR --text-file F [--ctx N] [--ram-budget B]
// Last line of stdout: "perplexity: X over N tokens".
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/spine_option.h"
#include "cli/token_list.h"
#include "engine/perplexity.h"
#include "hub/http_experts.h"

namespace sluice::cli {
namespace {

struct PerplexityArgs {
  std::string model, text_file, ram_budget;
  std::string spine;
  int ctx = 512;
};

int run_perplexity(const PerplexityArgs& a) {
  std::vector<int> ids = tokenize_text_file(a.model, a.text_file);
  ModelOptions opt;
  opt.spine = a.spine;
  if (!a.ram_budget.empty()) opt.ram_budget = parse_byte_size(a.ram_budget, "--ram-budget");
  opt.miss_filler = stream_miss_filler(a.model);
  auto model = open_model(a.model, opt);
  PerplexityResult r = perplexity(*model, ids, a.ctx);
  std::printf("tokens: %zu, context: %d, mean nll: %.6f\n", ids.size(), a.ctx, r.mean_nll);
  std::printf("perplexity: %.4f over %ld tokens\n", r.perplexity, r.predicted);
  return 0;
}

Command reg("perplexity", "Perplexity of a text file (exp of the mean next-token NLL)", [](CLI::App& sub, Action* act) {
  auto a = std::make_shared<PerplexityArgs>();
  sub.add_option("--model", a->model, "Model directory")->required();
  sub.add_option("--text-file", a->text_file, "Text to score")->required();
  sub.add_option("--ctx", a->ctx, "Window length in tokens (each window is a fresh sequence)")->check(CLI::Range(2, 1 << 20));
  sub.add_option("--ram-budget", a->ram_budget, "RAM the engine may use, e.g. 2M, 16G");
  add_spine_option(sub, a->spine);
  *act = [a] { return run_perplexity(*a); };
});

}  // namespace
}  // namespace sluice::cli
