// model/prefetcher.h — the expert prefetch guesses of a mixture-of-experts
// model, and how well they did (bench, cache-sim and --stats report them).
#pragma once
#include <cstdint>
#include <vector>

namespace sluice {

// Prefetch guesses and how well they did (decode steps), per layer.
struct Prefetcher {
  std::vector<std::vector<int>> last_route;  // experts the latest token chose, per layer
  std::vector<std::vector<int>> guess;       // the current guess for each layer, sorted
  std::vector<uint64_t> needed, guessed;     // per layer: experts needed, and of those guessed
  std::vector<uint64_t> guesses;             // per layer: experts guessed (precision = guessed / guesses)
  // Discipline: how many of its top-k the earliest lookahead (layer n-1's
  // FFN input) guesses in a decode step (-1: all k; a prefill chunk always
  // guesses all), and whether the late lookahead (layer n's estimated FFN
  // input) withdraws the earlier guesses it does not confirm. Chosen by
  // measurement (docs/decisions.md, "Reads"): the early guesses it does not
  // confirm were mostly wrong and, read before it came, wasted 0.3 GB a token.
  int early_per_row = 0;
  bool replace = true;
  double recall() const {
    uint64_t n = 0, g = 0;
    for (size_t l = 0; l < needed.size(); l++) n += needed[l], g += guessed[l];
    return n ? double(g) / double(n) : 0.0;
  }
  double precision() const {
    uint64_t n = 0, g = 0;
    for (size_t l = 0; l < guesses.size() && l < guessed.size(); l++) n += guesses[l], g += guessed[l];
    return n ? double(g) / double(n) : 0.0;
  }
};

}  // namespace sluice
