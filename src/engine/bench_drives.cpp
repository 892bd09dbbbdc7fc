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

void BenchDrives::add_step(const ExpertStats& before, const ExpertStats& after) {
  for (const auto& [file, drive] : drive_of_file_) {
    const size_t f = size_t(file);
    const uint64_t b = f < before.file_bytes_read.size() ? before.file_bytes_read[f] : 0;
    if (f < after.file_bytes_read.size()) drives_[drive].bytes += after.file_bytes_read[f] - b;
  }
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
