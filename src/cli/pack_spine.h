// cli/pack_spine.h — packing a checkpoint's spine with progress on stderr and
// a summary line on stdout: `sluice pack`, and `sluice setup --pack` once the
// install is complete.
#pragma once
#include <string>

namespace sluice::cli {

// Writes DIR's `spine` (lossless|int8) pack to `out` (empty: beside the shards);
// a pack already up to date is left as it is, a stale one is replaced (saying
// why). allow_unknown: --allow-unknown. Returns the exit code (0).
int pack_spine(const std::string& dir, const std::string& spine, const std::string& out, bool allow_unknown);

}  // namespace sluice::cli
