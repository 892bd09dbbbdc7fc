// sluice bench — prefill + decode timing against the disk's ceiling, one JSON record.
//   sluice bench --model DIR [--ram-budget B] [--prompt-tokens P] [--decode N] [--queue-depth Q] --json
//   sluice bench --model DIR --rows 1,2,4,8 [--draft-max K] [--repetitive]: pass time per R sequences
//   decoded together (engine/bench_rows.h)
// Progress (load, prefill, decode steps) on stderr; the record on stdout.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/model_args.h"
#include "cli/progress.h"
#include "cli/token_list.h"
#include "engine/bench.h"
#include "engine/bench_rows.h"
#include "kernels/device.h"

namespace sluice::cli {
namespace {

struct BenchArgs {
  ModelArgs m;
  BenchOptions opt;
  bool json = false;
  std::vector<int> rows;  // --rows: the rows bench instead
  int draft_max = 0;
  bool repetitive = false;
};

int run_bench_cmd(BenchArgs& a) {
  const int queue_depth = a.opt.model.queue_depth;
  a.opt.model = model_options(a.m);
  a.opt.model.queue_depth = queue_depth;
  if (!a.rows.empty()) {
    RowsBenchOptions r;
    r.model = a.opt.model;
    r.sequences = a.rows;
    r.prompt_tokens = a.opt.prompt_tokens;
    r.decode_tokens = a.opt.decode_tokens;
    r.prefill_chunk_tokens = a.opt.prefill_chunk_tokens;
    r.draft_max = a.draft_max;
    r.repetitive = a.repetitive;
    r.seed = a.opt.seed;
    nlohmann::json j = run_rows_bench(a.m.dir, r);
    std::printf("%s\n", a.json ? j.dump().c_str() : j.dump(2).c_str());
    return 0;
  }
  ProgressLine prefill("prefill");
  a.opt.prefill_progress = [&](size_t done, size_t total) { prefill.count(done, total, "tokens"); };
  ProgressLine decode("decode");
  a.opt.decode_progress = [&](size_t done, size_t total) { decode.count(done, total, "steps"); };
  nlohmann::json j = run_bench(a.m.dir, a.opt);
  const Backend& be = a.opt.model.backend ? *a.opt.model.backend : cpu_backend();
  j["device"] = describe_backend(be);  // run_bench adds "gpu" (ceilings and the step's floor) on a GPU
  std::printf("%s\n", a.json ? j.dump().c_str() : j.dump(2).c_str());
  return 0;
}

Command reg("bench", "Benchmark prefill and decode against the disk's read ceiling", [](CLI::App& sub, Action* act) {
  auto a = std::make_shared<BenchArgs>();
  add_model_options(sub, a->m);
  sub.add_option("-p,--prompt-tokens", a->opt.prompt_tokens, "Prompt length")->check(CLI::PositiveNumber);
  sub.add_option("-n,--decode", a->opt.decode_tokens, "Decode steps (the first is discarded)")->check(CLI::Range(2, 1 << 20));
  sub.add_option("-b,--batch-size", a->opt.prefill_chunk_tokens, "Prompt tokens per prefill chunk, as `run` and `serve`")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--queue-depth", a->opt.model.queue_depth, "Reads in flight in all, shared by the spine's loader and the expert reader while the spine streams (default: what `sluice probe --save` measured for this disk, else 16)")->check(CLI::Range(1, 1024));
  sub.add_option("--probe-seconds", a->opt.probe_seconds, "Time for the random-read probe (0: none)")
      ->check(CLI::Range(0.0, 3600.0));
  sub.add_flag("!--no-replay", a->opt.replay, "Skip replaying each step's reads with no compute");
  sub.add_flag("--save-compute", a->opt.save_compute,
               "Keep the median decode compute for `sluice plan` (needs the spine resident; "
               "$SLUICE_COMPUTE_PROFILE or ~/.cache/sluice/compute.json)");
  sub.add_option("-s,--seed", a->opt.seed, "Prompt seed");
  sub.add_flag("--json", a->json, "One-line JSON record");
  sub.add_option("--rows", a->rows,
                 "Instead: time passes over R sequences decoded together, for each R (e.g. 1,2,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  sub.add_option("--draft-max", a->draft_max, "With --rows: draft tokens per sequence and pass (0: none)")
      ->check(CLI::Range(0, 64));
  sub.add_flag("--repetitive", a->repetitive, "With --rows: prompts that repeat a passage (drafts get accepted)");
  *act = [a] { return run_bench_cmd(*a); };
});

}  // namespace
}  // namespace sluice::cli
