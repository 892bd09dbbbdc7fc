// engine/bench.h — one benchmark run: prefill, then greedy decode, with the
// read-bandwidth ceiling measured in the same run.
//
// Reports time to first token, prefill tokens/s, the median decode step (the
// first step discarded), bytes read per decoded token by class (spine, expert,
// expert bytes served by the cache), achieved GB/s, prefetch recall, and the
// O_DIRECT ceiling of the model's own files at the engine's queue depth and
// span size (store/bandwidth_probe.h). Headline ratios:
//   io_efficiency   = achieved GB/s / ceiling GB/s
//   step_over_floor = step time / (bytes read per step / ceiling)
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "k3/model.h"

namespace sluice {

struct BenchOptions {
  ModelOptions model;
  int prompt_tokens = 64;
  int decode_tokens = 8;
  uint64_t seed = 1;
  double probe_seconds = 5.0;
};

// Runs the benchmark on the model at `dir`; returns the JSON record.
nlohmann::json run_bench(const std::string& dir, const BenchOptions& opt);

}  // namespace sluice
