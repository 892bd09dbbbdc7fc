// k3/state_test_util.h — test helper: two sequence states are bitwise the same.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "k3/k3_model.h"
#include "k3/state.h"

namespace sluice {

// Bitwise equal (memcmp: -0 and NaN payloads count); empty vectors have no data() to compare.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Position, KDA recurrent and conv state, MLA cache: all bitwise equal.
inline void expect_same_state(const SequenceState& a, const SequenceState& b) {
  ASSERT_EQ(a.pos, b.pos);
  ASSERT_EQ(a.kda.size(), b.kda.size());
  for (size_t l = 0; l < a.kda.size(); l++) {
    EXPECT_TRUE(same_bits(a.kda[l].S, b.kda[l].S)) << "S " << l;
    EXPECT_TRUE(same_bits(a.kda[l].conv, b.kda[l].conv)) << "conv " << l;
  }
  ASSERT_EQ(a.mla.size(), b.mla.size());
  for (size_t l = 0; l < a.mla.size(); l++) {
    ASSERT_EQ(a.mla[l].len, b.mla[l].len);
    EXPECT_TRUE(same_bits(a.mla[l].kv, b.mla[l].kv)) << "kv " << l;
    EXPECT_TRUE(same_bits(a.mla[l].idx, b.mla[l].idx)) << "idx " << l;
  }
}

// The same for the K3 states inside two opaque ones (model/state.h).
inline void expect_same_state(const ModelState& a, const ModelState& b) { expect_same_state(k3_state(a), k3_state(b)); }

}  // namespace sluice
