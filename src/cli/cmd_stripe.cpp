// sluice stripe — lays a model's routed experts over several drives (io/stripe.h).
//   sluice stripe --model DIR --drives PATH[:WEIGHT],PATH[:WEIGHT],... [--copies N] [--spine] [--move]
// A drive's weight defaults to its O_DIRECT rate saved by `sluice probe --save`
// (or measured now on a scratch file there, and saved). Progress on stderr;
// "up to date" when the stripe is already there; a killed run resumes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/drives_arg.h"
#include "cli/model_args.h"
#include "hub/setup_manifest.h"
#include "io/stripe.h"

namespace sluice::cli {
namespace {

struct StripeArgs {
  std::string model, drives;
  int copies = 1;
  bool spine = false, move = false, allow_unknown = false;
};

// A stream install's shards hold holes where the experts are (they come
// from the hub): nothing to stripe.
void refuse_stream_install(const std::string& dir) {
  SetupManifest m;
  bool spine_only = stream_manifest_exists(dir);
  if (read_setup_manifest(dir, &m))
    for (const auto& [name, f] : m.files) spine_only = spine_only || f.spine_only;
  if (spine_only)
    fail(dir, "a stream install (sluice setup --stream): its routed experts are fetched from the hub, not held in the "
              "shards; stripe a full install");
}

int run_stripe(const StripeArgs& a) {
  remove_temps_on_signal("stripe");
  refuse_stream_install(a.model);
  const Checkpoint ck = open_checkpoint_warning(a.model, a.allow_unknown);
  const std::vector<StripeDrive> drives = drives_with_rates(a.drives);
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
  }, a.spine, a.move);
  if (tty) std::fprintf(stderr, "\n");
  for (size_t d = 0; d < drives.size(); d++)
    std::printf("drive %zu: %s (weight %.3g): %.3f GB of %s\n", d, drives[d].path.c_str(), drives[d].weight,
                double(r.drive_bytes[d]) / 1e9, a.spine ? "experts and spine" : "experts");
  if (r.up_to_date)
    std::printf("up to date %s\n", stripe_manifest_path(ck.dir).c_str());
  else
    std::printf("wrote %s: %d files written (%.3f GB), %d kept\n", stripe_manifest_path(ck.dir).c_str(), r.written,
                double(r.bytes_written) / 1e9, r.kept);
  if (stripe_moved(ck.dir))
    std::printf("moved: the shards no longer hold the routed experts (%.3f GB freed by this run); the drives hold "
                "their only copy\n", double(r.bytes_freed) / 1e9);
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
              sub.add_flag("--move", a->move,
                           "Then free the shards' copy of the experts (after checking every drive file against them): "
                           "their bytes become holes in the shards, the drives hold the only copy (the header and the "
                           "spine stay; --no-stripe is refused from then on)");
              add_allow_unknown_option(sub, a->allow_unknown);
              *action = [a] { return run_stripe(*a); };
            });

}  // namespace
}  // namespace sluice::cli
