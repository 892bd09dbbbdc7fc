// sluice pack — writes a packed copy of a checkpoint's spine beside its shards.
//   sluice pack --model DIR --spine lossless|int8 [--out FILE]
// Progress on stderr; the pack itself is written atomically (pack/pack.h).
// Packing again when a matching pack is there does nothing.
#include <string>

#include "cli/commands.h"
#include "cli/model_args.h"
#include "cli/pack_spine.h"

namespace sluice::cli {
namespace {

struct PackArgs {
  std::string model, spine = "lossless", out;
  bool allow_unknown = false;
};

int run_pack(const PackArgs& a) { return pack_spine(a.model, a.spine, a.out, a.allow_unknown); }

Command reg("pack", "Write a compressed copy of the spine (lossless: bit-exact; int8: lossy) beside the checkpoint",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<PackArgs>();
              sub.add_option("-m,--model", a->model, "Model directory")->required();
              sub.add_option("--spine", a->spine, "lossless (exact) or int8 (per-group int8, lossy: opt in with --spine int8)")->required();
              sub.add_option("--out", a->out, "Pack file (default: DIR/spine.<spine>.pack)");
              add_allow_unknown_option(sub, a->allow_unknown);
              *action = [a] { return run_pack(*a); };
            });

}  // namespace
}  // namespace sluice::cli
