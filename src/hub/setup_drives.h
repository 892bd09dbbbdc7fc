// hub/setup_drives.h — `sluice setup --full --drives`: a full install whose
// routed experts go from the hub straight to the drives of a stripe.
//
// A full install of K3 would put 1.5 TB in DEST before `stripe` copies the
// experts out. Here the shards are installed as a stream install would (the
// header and the spine at their offsets in sparse files, the experts' ranges
// holes), then each drive file of the stripe (io/stripe.h) is filled with
// Range requests for its experts, --jobs files at a time, and the stripe is
// written "moved" (the drives hold the only copy, as after `stripe --move`).
// Then every shard's sha256, read through the stripe, is compared with the
// hub's LFS oid: the install is then a full one (setup manifest "full", each
// shard's whole sha256; no stream manifest). A shard that differs loses its
// drive files and the stripe, and setup fails naming it: the next run fetches
// them again. A run killed anywhere resumes: finished drive files are kept
// (their names bind the shards), and until the end the directory is a
// working stream install.
#pragma once
#include <functional>
#include <vector>

#include "hub/http_setup.h"
#include "io/stripe.h"

namespace sluice {

struct DrivesSetupResult {
  SetupResult setup;         // the shards' header and spine
  StripeResult stripe;       // the experts on the drives
  int shards = 0;            // of the checkpoint
  int checked = -1;          // whose sha256, read through the stripe, matched the hub's oid this run (-1: not checked, a rerun of a finished install)
};

// options.mode must be full. stripe_progress(done, total) counts expert bytes.
DrivesSetupResult run_setup_to_drives(const SetupOptions& options, const std::vector<StripeDrive>& drives, int copies,
                                      const std::function<void(const SetupProgress&)>& on_progress,
                                      const std::function<void(uint64_t, uint64_t)>& stripe_progress);

}  // namespace sluice
