#include "cli/pack_spine.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "base/atomic_file.h"
#include "checkpoint/checkpoint.h"
#include "cli/model_args.h"
#include "pack/pack.h"

namespace sluice::cli {

int pack_spine(const std::string& dir, const std::string& spine, const std::string& out, bool allow_unknown) {
  remove_temps_on_signal("pack");
  const Checkpoint ck = open_checkpoint_warning(dir, allow_unknown);
  PackOptions o;
  o.format = parse_spine_format(spine);
  o.out = out;
  const bool tty = ::isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  int shown = -1;  // percent last printed: every 1% on a terminal, every 10% otherwise
  o.progress = [&](uint64_t done, uint64_t total) {
    const int pct = total ? int(100 * done / total) : 100;
    if (pct < 100 && shown >= 0 && pct - shown < (tty ? 1 : 10)) return;
    shown = pct;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%spack: %.2f / %.2f GB of spine (%.0f%%), %.0f MB/s%s", tty ? "\r" : "", double(done) / 1e9,
                 double(total) / 1e9, total ? 100.0 * double(done) / double(total) : 100.0,
                 s > 0 ? double(done) / s / 1e6 : 0.0, tty ? "" : "\n");
  };
  const PackResult r = write_pack(ck, o);
  if (tty && !r.up_to_date) std::fprintf(stderr, "\n");
  if (!r.replaced.empty()) std::fprintf(stderr, "pack: replaced the pack that was there: %s\n", r.replaced.c_str());
  std::printf("%s %s: %.3f GB of bf16 spine in %.3f GB %s(ratio %.4f)\n", r.up_to_date ? "up to date" : "wrote",
              r.path.c_str(), double(r.source_bytes) / 1e9, double(r.packed_bytes) / 1e9,
              o.format == SpineFormat::int8 ? "of int8, lossy " : "",
              r.source_bytes ? double(r.packed_bytes) / double(r.source_bytes) : 0.0);
  return 0;
}

}  // namespace sluice::cli
