// The files setup leaves in a model directory, read back: the manifests
// (.sluice-setup.json, .sluice-stream.json) and a stream-mode shard's progress
// file (.partial/<shard>.sparse.json), whose run count never exceeds the runs.
#include <stdlib.h>

#include <fstream>

#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "hub/setup_manifest.h"

namespace {

void put(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = sluice::fuzz::scratch_dir();
  const std::string_view text = sluice::fuzz::as_text(data, size);
  put(dir + "/" + sluice::kSetupManifestName, text);
  put(dir + "/" + sluice::kStreamManifestName, text);
  try {
    sluice::SetupManifest m;
    sluice::read_setup_manifest(dir, &m);
  } catch (const sluice::Error&) {
  }
  try {
    (void)sluice::read_stream_manifest(dir);
  } catch (const sluice::Error&) {
  }
  const std::string sha(64, 'a');
  if (sluice::read_stream_progress(text, 4096, sha, 3) > 3) __builtin_trap();
  return 0;
}
