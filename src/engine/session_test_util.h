// engine/session_test_util.h — test helper: a fresh session's logits at every
// position, fed as one chunk or one token at a time.
#pragma once
#include <vector>

#include "engine/session.h"

namespace sluice {

inline std::vector<float> run_all(Model& m, const std::vector<int>& toks, bool steps) {
  Session s(m);
  if (!steps) return s.prefill_all(toks);
  std::vector<float> out;
  for (int t : toks) {
    const auto& l = s.step(t);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

}  // namespace sluice
