// sluice bench — prefill + decode timing against the disk's ceiling, one JSON record.
//   sluice bench --model DIR [--ram-budget B] [--prompt-tokens P] [--decode N] [--queue-depth Q] --json
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/spine_option.h"
#include "cli/token_list.h"
#include "engine/bench.h"

namespace sluice::cli {
namespace {

struct BenchArgs {
  std::string model, ram_budget;
  BenchOptions opt;
  bool json = false;
};

int run_bench_cmd(BenchArgs& a) {
  if (!a.ram_budget.empty()) a.opt.model.ram_budget = parse_byte_size(a.ram_budget, "--ram-budget");
  nlohmann::json j = run_bench(a.model, a.opt);
  std::printf("%s\n", a.json ? j.dump().c_str() : j.dump(2).c_str());
  return 0;
}

Command reg("bench", "Benchmark prefill and decode against the disk's read ceiling", [](CLI::App& sub, Action* act) {
  auto a = std::make_shared<BenchArgs>();
  sub.add_option("--model", a->model, "Model directory")->required();
  sub.add_option("--ram-budget", a->ram_budget, "RAM the engine may use, e.g. 4G");
  add_spine_option(sub, a->opt.model.spine);
  sub.add_option("--prompt-tokens", a->opt.prompt_tokens, "Prompt length")->check(CLI::PositiveNumber);
  sub.add_option("--decode", a->opt.decode_tokens, "Decode steps (the first is discarded)")->check(CLI::Range(2, 1 << 20));
  sub.add_option("--queue-depth", a->opt.model.queue_depth, "Reads in flight")->check(CLI::Range(1, 1024));
  sub.add_option("--probe-seconds", a->opt.probe_seconds, "Time for the random-read probe (0: none)");
  sub.add_flag("!--no-replay", a->opt.replay, "Skip replaying each step's reads with no compute");
  sub.add_option("--seed", a->opt.seed, "Prompt seed");
  sub.add_flag("--json", a->json, "One-line JSON record");
  *act = [a] { return run_bench_cmd(*a); };
});

}  // namespace
}  // namespace sluice::cli
