// engine/bench_rows.h — what a pass over R rows costs: R sequences decoded
// together (engine/batch.h), for each R asked.
//
// For each R: R generations of different prompts (greedy; drafting as asked,
// so a pass has sum(1 + drafts) rows) are prefilled, then decoded together.
// Only passes over all R sequences with no prefill in the same step are
// timed, the first of them discarded. Per R the record gives the median pass
// time, rows and tokens per pass, draft acceptance, weight bytes read per pass
// and per generated token, and tokens/s; `vs_one_row` divides by the R = 1
// figures of the same run (the ceiling here is R independent runs: R times
// the one-row pass time).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace sluice {

struct RowsBenchOptions {
  ModelOptions model;
  std::vector<int> sequences = {1, 2, 4, 8};
  int prompt_tokens = 32;
  int decode_tokens = 8;  // passes over all R sequences timed (after one untimed)
  int draft_max = 0;      // 0: no drafts (a pass has R rows)
  bool repetitive = false;  // prompts that repeat a passage (drafts from them get accepted)
  uint64_t seed = 1;
  int prefill_chunk_tokens = 256;
};

nlohmann::json run_rows_bench(const std::string& dir, const RowsBenchOptions& opt);

}  // namespace sluice
