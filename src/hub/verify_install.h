// hub/verify_install.h — checks an installed model directory (`sluice verify`).
//
// What is checked:
//  - every file the last setup planned is there, recorded as complete, with
//    the right size and sha256 (the whole file; for a stream-mode shard, the
//    header and spine bytes, against the hash recorded when they arrived; a
//    shard whose experts were moved to a stripe's drives, io/stripe.h
//    --move, with those read from the drives);
//  - the config contract and the expert span index (open_checkpoint), and for
//    a stream install that every shard has a URL and the right size;
//  - every span cache entry against its recorded sha256;
//  - leftover partial downloads: resumable ones are noted, stale or oversized
//    ones are problems.
// With `repair`: bad cache entries and bad partial downloads are deleted (they
// are fetched again on next use or by the next setup), and bad installed files
// are dropped from the setup manifest so that the next `sluice setup`
// downloads them again. Nothing else is ever deleted.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace sluice {

enum class VerifyLevel { ok, note, problem };

struct VerifyLine {
  VerifyLevel level = VerifyLevel::ok;
  std::string text;
};

struct VerifyResult {
  int problems = 0;  // problems found and not repaired
  int repaired = 0;  // problems found and repaired
};

// The sha256 of shard `shard` of ck as it was installed, its experts moved to
// a stripe's drives (ck read through the stripe; `moved`: that shard's
// moved_expert_spans, io/stripe.h): its own bytes, each moved span read from
// its drive file in place of the hole.
std::string moved_shard_sha256(const Checkpoint& ck, const std::vector<std::pair<uint64_t, FileSpan>>& moved, size_t shard);

VerifyResult verify_model(const std::string& dir, bool repair, const std::function<void(const VerifyLine&)>& report);

}  // namespace sluice
