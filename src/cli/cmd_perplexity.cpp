// sluice perplexity — how well the model predicts a text file.
//   sluice perplexity --model DIR --text-file F [--ctx N] [--ram-budget B]
// Progress on stderr (cli/progress.h).
// Last line of stdout: "perplexity: X over N tokens".
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/model_args.h"
#include "cli/progress.h"
#include "cli/token_list.h"
#include "engine/perplexity.h"

namespace sluice::cli {
namespace {

struct PerplexityArgs {
  ModelArgs m;
  std::string text_file;
  int ctx = 512;
};

int run_perplexity(const PerplexityArgs& a) {
  std::vector<int> ids = tokenize_text_file(a.m.dir, a.text_file);
  ModelOptions opt = model_options(a.m);
  opt.max_context = a.ctx;  // each window is one sequence, computed in one pass with every position's logits
  opt.chunk_tokens = a.ctx;
  opt.all_logits = true;
  auto model = open_model(a.m.dir, opt);
  ProgressLine line("perplexity");
  PerplexityResult r =
      perplexity(*model, ids, a.ctx, [&](size_t done, size_t total) { line.count(done, total, "tokens"); });
  std::printf("tokens: %zu, context: %d, mean nll: %.6f\n", ids.size(), a.ctx, r.mean_nll);
  std::printf("perplexity: %.4f over %ld tokens\n", r.perplexity, r.predicted);
  return 0;
}

Command reg("perplexity", "Perplexity of a text file (exp of the mean next-token NLL)", [](CLI::App& sub, Action* act) {
  auto a = std::make_shared<PerplexityArgs>();
  add_model_options(sub, a->m);
  sub.add_option("-f,--text-file", a->text_file, "Text to score")->required();
  CLI::Option* ctx = sub.add_option("--ctx", a->ctx, "Window length in tokens (each window is a fresh sequence; "
                                    "default: --ctx-size, else 512)")->check(CLI::Range(2, 1 << 20));
  *act = [a, ctx] {
    if (ctx->count() == 0 && a->m.ctx_size > 0) a->ctx = a->m.ctx_size;
    return run_perplexity(*a);
  };
});

}  // namespace
}  // namespace sluice::cli
