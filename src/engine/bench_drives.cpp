#include "engine/bench_drives.h"

#include <filesystem>

#include "io/stripe.h"

namespace sluice {

BenchDrives::BenchDrives(const Model& m) {
  if (!std::filesystem::exists(stripe_manifest_path(m.checkpoint().dir))) return;
  const Stripe s = read_stripe(m.checkpoint().dir);
  for (const StripeDrive& d : s.drives) drives_.push_back({d.path, {}, 0, 0});
  for (size_t id = 0; id < m.checkpoint().shard_paths.size(); id++) {
    const int d = stripe_drive_of(s, m.checkpoint().shard_paths[id]);
    if (d < 0) continue;
    drive_of_file_[int(id)] = size_t(d);
    drives_[size_t(d)].files.push_back(m.checkpoint().shard_paths[id]);
  }
  if (drive_of_file_.empty()) drives_.clear();  // --no-stripe, or a stale stripe
}

void BenchDrives::add_step(const ExpertStats& before, const ExpertStats& after, const SpanStreamStats& spine_before,
                           const SpanStreamStats& spine_after) {
  const auto grew = [](const std::vector<uint64_t>& b, const std::vector<uint64_t>& a, size_t f) -> uint64_t {
    return f < a.size() ? a[f] - (f < b.size() ? b[f] : 0) : 0;
  };
  for (const auto& [file, drive] : drive_of_file_)
    drives_[drive].bytes += grew(before.file_bytes_read, after.file_bytes_read, size_t(file)) +
                            grew(spine_before.file_bytes, spine_after.file_bytes, size_t(file));
}

void BenchDrives::probe(const ProbeOptions& po) {
  for (Drive& d : drives_)
    if (!d.files.empty()) d.ceiling = measure_read_ceiling(d.files, po).gbps;
}

double BenchDrives::ceiling_gbps() const {
  double sum = 0;
  for (const Drive& d : drives_) sum += d.ceiling;
  return sum;
}

nlohmann::json BenchDrives::json(int steps, double seconds) const {
  nlohmann::json out = nlohmann::json::array();
  for (const Drive& d : drives_)
    out.push_back({{"path", d.path},
                   {"bytes_per_token", steps > 0 ? double(d.bytes) / steps : 0.0},
                   {"gbps", seconds > 0 ? double(d.bytes) / seconds / 1e9 : 0.0},
                   {"ceiling_gbps", d.ceiling}});
  return out;
}

}  // namespace sluice
