// engine/bench.h — one benchmark run: prefill, then greedy decode, with the
// read-bandwidth ceiling measured in the same run.
//
// Reports time to first token, prefill tokens/s, the median decode step (the
// first step discarded), bytes read per decoded token by class (streamed
// spine, experts read, expert bytes served by the cache), achieved GB/s,
// prefetch recall, how long the spine loader sat idle (the disk waiting for
// compute), and the ceiling, the largest of three I/O-only measures taken in
// the same run at the engine's queue depth:
//   replay_gbps        after every step, that step's bytes read again in its
//                      own order with nothing computed: a spine pass through
//                      the engine's stream, each layer's expert spans read as
//                      the pass reaches the layer. Each steady step is bracketed
//                      by two replays, seconds apart: these disks swing 2-3x
//                      within a minute.
//   spine_pass_gbps    a bare spine pass (sequential streaming alone), before
//                      and after the steps.
//   probe_random_gbps  random expert-sized O_DIRECT reads of the model's files,
//                      half before the steps and half after (io/bandwidth_probe.h).
// Headline ratios:
//   io_efficiency   = achieved GB/s / ceiling GB/s
//   step_over_floor = median step time / (bytes read per step / ceiling)
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace sluice {

struct BenchOptions {
  ModelOptions model;
  int prompt_tokens = 64;
  int decode_tokens = 8;
  uint64_t seed = 1;
  double probe_seconds = 5.0;  // random-read probe, split before and after the steps (0: none)
  bool replay = true;          // replay each step's reads with no compute
  // Keep the median decode compute and its kernel bytes for `sluice plan`
  // (engine/compute_profile.h); needs the spine resident.
  bool save_compute = false;
  // The prompt is fed in chunks of this many tokens, as generate() does for
  // `run` and `serve`, so the prefill figures are what they see.
  int prefill_chunk_tokens = 256;
  // Progress (either may be empty): prompt tokens computed, and decode steps done.
  std::function<void(size_t done, size_t total)> prefill_progress, decode_progress;
};

// Runs the benchmark on the model at `dir`; returns the JSON record.
nlohmann::json run_bench(const std::string& dir, const BenchOptions& opt);

}  // namespace sluice
