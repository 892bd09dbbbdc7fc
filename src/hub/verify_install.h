// hub/verify_install.h — checks an installed model directory (`sluice verify`).
//
// What is checked:
//  - every file the last setup planned is there, recorded as complete, with
//    the right size and sha256 (the whole file; for a stream-mode shard, the
//    header and spine bytes, against the hash recorded when they arrived);
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
#include <functional>
#include <string>

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

VerifyResult verify_model(const std::string& dir, bool repair, const std::function<void(const VerifyLine&)>& report);

}  // namespace sluice
