#include "cli/drives_arg.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "cli/model_args.h"
#include "io/bandwidth_probe.h"
#include "io/depth_profile.h"

namespace sluice::cli {
namespace {

double drive_rate(const std::string& folder) {
  if (const double g = saved_gbps(folder); g > 0) return g;
  const std::string scratch = folder + "/.sluice-probe." + std::to_string(::getpid());
  struct Remove {
    std::string p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{scratch};
  write_probe_file(scratch, 1ull << 30);
  ProbeOptions o;
  o.max_seconds = 3;
  o.budget_bytes = 2ull << 30;
  const ProbeResult r = measure_read_ceiling({scratch}, o);
  std::fprintf(stderr, "stripe: %s reads %.2f GB/s (O_DIRECT%s)\n", folder.c_str(), r.gbps, r.direct ? "" : " refused: buffered");
  try {
    save_depth_profile(depth_profile_path(), device_of(scratch), {{o.reader.queue_depth, {r.gbps}}});
  } catch (const Error& e) {
    print_warning(std::string("not saved: ") + e.what());
  }
  return r.gbps;
}

}  // namespace

std::vector<StripeDrive> drives_with_rates(const std::string& list) {
  std::vector<StripeDrive> drives = parse_drives(list);
  for (StripeDrive& d : drives) {
    std::filesystem::create_directories(d.path);
    d.path = std::filesystem::absolute(d.path).lexically_normal().string();
    while (d.path.size() > 1 && d.path.back() == '/') d.path.pop_back();
    if (d.weight <= 0) d.weight = drive_rate(d.path);
  }
  return drives;
}

}  // namespace sluice::cli
