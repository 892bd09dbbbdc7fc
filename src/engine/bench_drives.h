// engine/bench_drives.h — the bench's per-drive numbers for a striped model
// (io/stripe.h): each drive's expert bytes per token, the rate it delivered
// them at during the steps, and its own O_DIRECT ceiling measured in the same
// run; the sum of those ceilings is the striped model's I/O ceiling.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/bandwidth_probe.h"
#include "io/expert_source.h"
#include "io/span_stream.h"
#include "model/model.h"

namespace sluice {

class BenchDrives {
 public:
  // Empty (striped() false) unless m's experts read through a stripe.
  explicit BenchDrives(const Model& m);
  bool striped() const { return !drives_.empty(); }
  // One steady step: the expert source's stats before and after it (the
  // bytes each drive file delivered; reads withdrawn before they started
  // count nothing).
  // With a striped spine (stripe --spine) the spine stream's bytes from each
  // drive file count too (its stats before and after the step).
  void add_step(const ExpertStats& before, const ExpertStats& after, const SpanStreamStats& spine_before = {},
                const SpanStreamStats& spine_after = {});
  // Each drive's ceiling: random span reads of its files, `po` as the bench's probe.
  void probe(const ProbeOptions& po);
  double ceiling_gbps() const;
  // [{path, bytes_per_token, gbps, ceiling_gbps}], over `steps` steps of `seconds` in all.
  nlohmann::json json(int steps, double seconds) const;

 private:
  struct Drive {
    std::string path;
    std::vector<std::string> files;
    uint64_t bytes = 0;
    double ceiling = 0;
  };
  std::vector<Drive> drives_;
  std::map<int, size_t> drive_of_file_;  // checkpoint file id -> drive
};

}  // namespace sluice
