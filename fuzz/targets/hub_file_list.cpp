// The hub's revision file list (/api/models/ORG/NAME/revision/REV?blobs=true).
#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "hub/http_hub.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    sluice::HubRevision rev = sluice::parse_hub_revision(sluice::fuzz::as_text(data, size), "hub");
    for (const auto& f : rev.files)
      if (!sluice::is_safe_relative_path(f.name) || sluice::is_reserved_name(f.name)) __builtin_trap();
  } catch (const sluice::Error&) {
  }
  return 0;
}
