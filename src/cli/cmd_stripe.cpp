// sluice stripe — lays a model's routed experts over several drives (io/stripe.h).
//   sluice stripe --model DIR --drives PATH[:WEIGHT],PATH[:WEIGHT],... [--copies N] [--spine]
// A drive's weight defaults to its O_DIRECT rate saved by `sluice probe --save`
// (or measured now on a scratch file there, and saved). Progress on stderr;
// "up to date" when the stripe is already there; a killed run resumes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "base/atomic_file.h"
#include "cli/commands.h"
#include "cli/model_args.h"
#include "io/bandwidth_probe.h"
#include "io/depth_profile.h"
#include "io/stripe.h"

namespace sluice::cli {
namespace {

struct StripeArgs {
  std::string model, drives;
  int copies = 1;
  bool spine = false, allow_unknown = false;
};

// The drive's O_DIRECT rate: saved by an earlier probe, else measured on a
// 1 GB scratch file written there (and saved for the next time).
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

int run_stripe(const StripeArgs& a) {
  remove_temps_on_signal("stripe");
  const Checkpoint ck = open_checkpoint_warning(a.model, a.allow_unknown);
  std::vector<StripeDrive> drives = parse_drives(a.drives);
  for (StripeDrive& d : drives) {
    std::filesystem::create_directories(d.path);
    d.path = std::filesystem::absolute(d.path).lexically_normal().string();
    while (d.path.size() > 1 && d.path.back() == '/') d.path.pop_back();
    if (d.weight <= 0) d.weight = drive_rate(d.path);
  }
  const bool tty = ::isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  int shown = -1;
  const StripeResult r = write_stripe(ck, drives, a.copies, [&](uint64_t done, uint64_t total) {
    const int pct = total ? int(100 * done / total) : 100;
    if (pct < 100 && shown >= 0 && pct - shown < (tty ? 1 : 10)) return;
    shown = pct;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%sstripe: %.2f / %.2f GB of %s (%.0f%%), %.0f MB/s%s", tty ? "\r" : "", double(done) / 1e9,
                 double(total) / 1e9, a.spine ? "experts and spine" : "experts", total ? 100.0 * double(done) / double(total) : 100.0,
                 s > 0 ? double(done) / s / 1e6 : 0.0, tty ? "" : "\n");
  }, a.spine);
  if (tty) std::fprintf(stderr, "\n");
  for (size_t d = 0; d < drives.size(); d++)
    std::printf("drive %zu: %s (weight %.3g): %.3f GB of %s\n", d, drives[d].path.c_str(), drives[d].weight,
                double(r.drive_bytes[d]) / 1e9, a.spine ? "experts and spine" : "experts");
  if (r.up_to_date)
    std::printf("up to date %s\n", stripe_manifest_path(ck.dir).c_str());
  else
    std::printf("wrote %s: %d files written (%.3f GB), %d kept\n", stripe_manifest_path(ck.dir).c_str(), r.written,
                double(r.bytes_written) / 1e9, r.kept);
  return 0;
}

Command reg("stripe", "Lay the routed experts over several drives, read at the sum of their bandwidths",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<StripeArgs>();
              sub.add_option("-m,--model", a->model, "Model directory")->required();
              sub.add_option("--drives", a->drives,
                             "Folders on the drives, PATH[:WEIGHT],... (weight: share of the experts; default: the "
                             "drive's O_DIRECT rate from `sluice probe --save`, or measured now)")
                  ->required();
              sub.add_option("--copies", a->copies,
                             "Drives holding each expert (default 1): with 2 or more every read goes to the least "
                             "busy copy, so a token's randomly routed experts load the drives evenly (that many "
                             "times the disk space)")
                  ->check(CLI::Range(1, 64));
              sub.add_flag("--spine", a->spine,
                           "Lay the spine's tensors over the drives too (one copy each): the part of the spine that "
                           "streams then reads at the drives' summed rate (a spine pack is read from its own file)");
              add_allow_unknown_option(sub, a->allow_unknown);
              *action = [a] { return run_stripe(*a); };
            });

}  // namespace
}  // namespace sluice::cli
