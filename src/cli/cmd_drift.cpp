// sluice drift — what the int8 spine costs against the exact one (engine/drift.h).
//   sluice drift --model DIR [--text-file F] [--prompts N] [--prompt-tokens N]
//                [--tokens N] [--ctx N] [--cases DIR] [--threads N] [--int8-pack FILE]
// Needs DIR's int8 pack (sluice pack --spine int8), or the one --int8-pack names. The exact side is the
// default spine (the lossless pack when present, else bf16: the same bits).
// Prompts are cut from the text (default DIR/heldout.txt) at evenly spaced
// places; with no text, they are random token ids (seeded) and perplexity is
// left out. --cases DIR adds max |Δlogit| per fixture case (*.json with
// "name" and "tokens"). Prints a markdown table on stdout.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/model_args.h"
#include "cli/progress.h"
#include "cli/token_list.h"
#include "engine/drift.h"
#include "kernels/threads.h"
#include "model/dense_reads.h"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;

struct DriftArgs {
  std::string model, text_file, cases, int8_pack;
  bool allow_unknown = false;
  int prompts = 100, prompt_tokens = 16, tokens = 64, ctx = 256, threads = 0;
};

std::vector<DriftCase> load_cases(const std::string& dir) {
  std::vector<DriftCase> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f);
    try {
      const nlohmann::json j = nlohmann::json::parse(in);
      if (!j.contains("tokens")) continue;
      out.push_back({j.value("name", f.stem().string()), j.at("tokens").get<std::vector<int>>()});
    } catch (const nlohmann::json::exception& e) {
      fail(f.string(), std::string("not a case file: ") + e.what());
    }
  }
  if (out.empty()) fail(dir, "no case files (*.json with \"tokens\") here");
  return out;
}

int run_drift(const DriftArgs& a) {
  if (a.threads > 0) kernels::set_num_threads(a.threads);
  DriftOptions o;
  o.new_tokens = a.tokens;
  o.ctx = a.ctx;
  std::string text = a.text_file;
  if (text.empty() && fs::exists(a.model + "/heldout.txt")) text = a.model + "/heldout.txt";
  if (!text.empty()) o.text = tokenize_text_file(a.model, text);
  if (!a.cases.empty()) o.cases = load_cases(a.cases);
  ModelOptions mo;
  mo.allow_unknown = a.allow_unknown;
  mo.on_warning = print_warning;
  mo.max_context = std::max(a.ctx, a.prompt_tokens + a.tokens) + 8;
  for (const DriftCase& k : o.cases) mo.max_context = std::max(mo.max_context, int(k.tokens.size()) + 8);
  mo.chunk_tokens = mo.max_context;
  mo.all_logits = true;
  ModelOptions m8 = mo;
  m8.spine = "int8";
  m8.spine_pack = a.int8_pack;
  auto lossy = open_model(a.model, m8);  // first: a missing int8 pack fails before any work
  auto exact = open_model(a.model, mo);
  const int V = exact->config().vocab_size;
  if (o.text.size() >= size_t(a.prompt_tokens)) {
    const size_t room = o.text.size() - size_t(a.prompt_tokens);
    for (int i = 0; i < a.prompts; i++) {
      const size_t at = room * size_t(i) / size_t(std::max(1, a.prompts));
      o.prompts.emplace_back(o.text.begin() + long(at), o.text.begin() + long(at) + a.prompt_tokens);
    }
  } else {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> id(0, std::min(V, 4096) - 1);
    for (int i = 0; i < a.prompts; i++) {
      o.prompts.emplace_back();
      for (int k = 0; k < a.prompt_tokens; k++) o.prompts.back().push_back(id(rng));
    }
  }
  ProgressLine line("drift");
  o.progress = [&](const std::string& what, size_t done, size_t total) { line.count(done, total, what); };
  const DriftReport r = measure_drift(*exact, *lossy, o);
  line.update("done", true);
  const std::string exact_name = exact->io().spine && exact->io().spine->pack() ? "lossless" : "bf16";
  std::printf("int8 spine vs exact (%s), %s\n\n| measure | value |\n|---|---|\n", exact_name.c_str(), a.model.c_str());
  if (!o.text.empty())
    std::printf("| held-out perplexity, exact / int8 (%ld tokens, ctx %d) | %.4f / %.4f (%+.3f%%) |\n", r.ppl_tokens,
                a.ctx, r.ppl_exact, r.ppl_lossy, 100.0 * (r.ppl_lossy / r.ppl_exact - 1.0));
  const double n = double(r.prompts) * r.new_tokens;
  std::printf("| greedy, %d prompts of %d tokens (%s) x %d new: identical tokens | %.4f |\n", r.prompts, a.prompt_tokens,
              o.text.empty() ? "random ids" : "from the text", r.new_tokens, n > 0 ? double(r.tokens_same) / n : 0.0);
  std::printf("| greedy: fully identical continuations | %d of %d (%.3f) |\n", r.continuations_same, r.prompts,
              r.prompts ? double(r.continuations_same) / r.prompts : 0.0);
  std::printf("| greedy: mean first differing position | %.1f of %d |\n", r.mean_first_divergence, r.new_tokens);
  std::printf("| teacher-forced top-1 agreement (int8 fed the exact continuation) | %.4f |\n",
              n > 0 ? double(r.forced_same) / n : 0.0);
  std::printf("| max abs logit diff over prompts+continuations (max abs logit) | %.4g (%.4g) |\n", r.max_dlogit, r.max_logit);
  for (size_t l = 0; l < r.layer_rel_error.size(); l++)
    std::printf("| hidden-state relative error after layer %zu | %.5f |\n", l, r.layer_rel_error[l]);
  for (const DriftCaseResult& k : r.cases)
    std::printf("| case '%s' (%d positions): max abs logit diff (max abs logit), argmax same | %.4g (%.4g), %d of %d |\n",
                k.name.c_str(), k.positions, k.max_dlogit, k.max_logit, k.argmax_same, k.positions);
  return 0;
}

Command reg("drift", "Measure what the int8 spine costs against the exact one (perplexity, greedy agreement, "
                     "hidden-state error, logit drift)",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<DriftArgs>();
              sub.add_option("-m,--model", a->model, "Model directory (with its int8 pack)")->required();
              add_allow_unknown_option(sub, a->allow_unknown);
              sub.add_option("-f,--text-file", a->text_file, "Held-out text (default: DIR/heldout.txt when there)");
              sub.add_option("--prompts", a->prompts, "Greedy prompts (default 100)")->check(CLI::Range(1, 100000));
              sub.add_option("--prompt-tokens", a->prompt_tokens, "Tokens per prompt (default 16)")->check(CLI::Range(1, 4096));
              sub.add_option("--tokens", a->tokens, "Greedy tokens per prompt (default 64)")->check(CLI::Range(1, 4096));
              sub.add_option("--ctx", a->ctx, "Perplexity window (default 256)")->check(CLI::Range(2, 1 << 16));
              sub.add_option("--cases", a->cases, "Folder of fixture cases (*.json with tokens) for max |dlogit|");
              sub.add_option("-t,--threads", a->threads, "Kernel threads (default: every CPU)")->check(CLI::Range(1, 1024));
              sub.add_option("--int8-pack", a->int8_pack, "The int8 pack, when not DIR/spine.int8.pack (sluice pack --out)");
              *action = [a] { return run_drift(*a); };
            });

}  // namespace
}  // namespace sluice::cli
