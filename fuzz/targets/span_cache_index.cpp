// The span cache's index: entry names (L<layer>-E<expert>-<sha256>) parsed back
// from a directory listing; a name that parses spells itself again.
#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "hub/span_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(sluice::fuzz::as_text(data, size));
  int layer = -1, expert = -1;
  std::string sha;
  try {
    if (sluice::parse_span_cache_name(name, &layer, &expert, &sha)) {
      if (layer < 0 || expert < 0) __builtin_trap();
      if (sluice::span_cache_name(layer, expert, sha) != name) __builtin_trap();
    }
  } catch (const sluice::Error&) {
  }
  return 0;
}
