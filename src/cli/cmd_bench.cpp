// sluice bench — prefill + decode timing against the disk's ceiling.
//   sluice bench --model DIR [--ram-budget B] [--prompt-tokens P] [--decode N] [--queue-depth Q] [--json]
//   sluice bench --model DIR --rows 1,2,4,8 [--draft-max K] [--repetitive]: pass time per R sequences
//   decoded together (engine/bench_rows.h)
// Progress (load, prefill, decode steps) on stderr; on stdout a short table
// for a person, or with --json the whole record (one line) for scripts.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/bytes.h"
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

// A Markdown table with aligned columns (llama-bench's shape), on stdout.
void print_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); c++) {
    width[c] = head[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); c++) s += "| " + cells[c] + std::string(width[c] - cells[c].size(), ' ') + " ";
    std::printf("%s|\n", s.c_str());
  };
  line(head);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  line(rule);
  for (const auto& r : rows) line(r);
}

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// Seconds to 4 significant digits: a nano model's steps are microseconds, K3's minutes.
std::string secs(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

std::string model_name(const std::string& dir) {
  std::filesystem::path p(dir);
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// The headline of one run; the rest is in --json.
void print_run_table(const nlohmann::json& j) {
  print_table({"model", "budget", "spine", "device", "prompt", "prefill tok/s", "decode s/token", "decode tok/s",
               "GB/s", "ceiling GB/s", "io_efficiency", "step_over_floor", "bound"},
              {{model_name(j.value("model", "")), format_bytes(j.value("ram_budget", uint64_t(0))),
                j.value("spine_resident", false) ? "resident" : "streamed", j.value("device", ""),
                std::to_string(j.value("prompt_tokens", 0)), fixed(j.value("prefill_tok_s", 0.0), 1),
                secs(j.value("decode_s_per_token", 0.0)), fixed(j.value("decode_tok_s", 0.0), 2),
                fixed(j.value("achieved_gbps", 0.0), 2), fixed(j.value("ceiling_gbps", 0.0), 2),
                fixed(j.value("io_efficiency", 0.0), 2), fixed(j.value("step_over_floor", 0.0), 2),
                j.value("bound", "")}});
}

void print_rows_table(const nlohmann::json& j) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : j.value("rows", nlohmann::json::array()))
    rows.push_back({std::to_string(r.value("sequences", 0)), secs(r.value("pass_s", 0.0)),
                    fixed(r.value("tokens_per_pass", 0.0), 2), fixed(r.value("tokens_per_s", 0.0), 2),
                    format_bytes(uint64_t(r.value("bytes_per_token", 0.0))), fixed(r.value("draft_acceptance", 0.0), 2)});
  print_table({"sequences", "pass s", "tokens/pass", "tok/s", "bytes/token", "draft acceptance"}, rows);
}

// The table, or with --json the record; a person is told where the rest is.
void print_result(const nlohmann::json& j, bool json, bool rows) {
  if (json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  rows ? print_rows_table(j) : print_run_table(j);
  std::fputs("sluice: bench: the whole record (bytes by class, prefetch, ceilings): --json\n", stderr);
}

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
    print_result(run_rows_bench(a.m.dir, r), a.json, true);
    return 0;
  }
  ProgressLine prefill("prefill");
  a.opt.prefill_progress = [&](size_t done, size_t total) { prefill.count(done, total, "tokens"); };
  ProgressLine decode("decode");
  a.opt.decode_progress = [&](size_t done, size_t total) { decode.count(done, total, "steps"); };
  nlohmann::json j = run_bench(a.m.dir, a.opt);
  const Backend& be = a.opt.model.backend ? *a.opt.model.backend : cpu_backend();
  j["device"] = describe_backend(be);  // run_bench adds "gpu" (ceilings and the step's floor) on a GPU
  print_result(j, a.json, false);
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
  sub.add_flag("--json", a->json, "The whole record as one line of JSON (default: a short table)");
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
