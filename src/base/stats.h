// base/stats.h — small statistics over measurements (bench steps, probe rounds).
#pragma once
#include <algorithm>
#include <vector>

namespace sluice {

// The middle value; for an even count the upper of the two middle ones (a
// value that was measured), 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace sluice
