// sluice verify — check an installed model directory; optionally repair what can be refetched.
//   sluice verify --model DIR [--repair]
// Prints one line per check on stdout; exits 1 if any problem remains.
#include <cstdio>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "hub/verify_install.h"
#include "io/stripe.h"
#include "pack/pack.h"

namespace sluice::cli {
namespace {

struct VerifyArgs {
  std::string model;
  bool repair = false;
};

// Packs beside the checkpoint (pack/pack.h): bound to it, and decoding to its bytes.
void verify_packs(const std::string& dir, VerifyResult& r) {
  for (SpineFormat f : {SpineFormat::lossless, SpineFormat::int8}) {
    const std::string path = pack_path(dir, f);
    if (!std::filesystem::exists(path)) continue;
    std::vector<std::string> problems;
    try {
      problems = verify_pack(path, open_checkpoint(dir));
    } catch (const Error& e) {
      problems = {e.what()};
    }
    for (const std::string& p : problems) std::printf("PROBLEM %s\n", p.c_str());
    if (problems.empty())
      std::printf("ok      %s: bound to this checkpoint, every block %s\n", path.c_str(),
                  f == SpineFormat::int8 ? "is its source quantized" : "decodes to its source");
    r.problems += int(problems.size());
  }
}

// A stripe (io/stripe.h): every drive file whole and bit-exact; --repair writes bad ones again.
void verify_stripes(const std::string& dir, bool repair, VerifyResult& r) {
  if (!std::filesystem::exists(stripe_manifest_path(dir))) return;
  std::vector<std::string> problems;
  try {
    problems = verify_stripe(open_checkpoint(dir), repair);
  } catch (const Error& e) {
    problems = {e.what()};
  }
  for (const std::string& p : problems) std::printf("PROBLEM %s\n", p.c_str());
  if (problems.empty())
    std::printf("ok      %s: every drive file is whole and holds the bytes it names (%s)\n", stripe_manifest_path(dir).c_str(),
                stripe_moved(dir) ? "moved experts: against their checksums, the shards holding none" : "against the shards");
  r.problems += int(problems.size());
}

int run_verify(const VerifyArgs& a) {
  VerifyResult r = verify_model(a.model, a.repair, [](const VerifyLine& l) {
    const char* tag = l.level == VerifyLevel::ok ? "ok     " : l.level == VerifyLevel::note ? "note   " : "PROBLEM";
    std::printf("%s %s\n", tag, l.text.c_str());
    std::fflush(stdout);
  });
  verify_packs(a.model, r);
  verify_stripes(a.model, a.repair, r);
  if (r.problems == 0)
    std::printf("verify: %s is good%s\n", a.model.c_str(),
                r.repaired ? (" after " + std::to_string(r.repaired) + " repairs").c_str() : "");
  else
    std::printf("verify: %d problem%s in %s%s\n", r.problems, r.problems == 1 ? "" : "s", a.model.c_str(),
                a.repair ? "" : " (--repair fixes cache entries and partial downloads)");
  return r.problems == 0 ? 0 : 1;
}

Command reg("verify", "Check an installed model: files, hashes, config, span index, span cache",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<VerifyArgs>();
              sub.add_option("-m,--model", a->model, "Model directory")->required();
              sub.add_flag("--repair", a->repair,
                           "Delete bad cache entries and partial downloads; forget bad files so setup refetches them");
              *action = [a] { return run_verify(*a); };
            });

}  // namespace
}  // namespace sluice::cli
