// pack/pack_test_util.h — what the pack tests share: a scratch copy of the
// k3-tiny fixture model (a pack goes beside its shards) and an error catcher.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

#include "base/error.h"

namespace sluice::pack_test {

namespace fs = std::filesystem;
inline const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

// A copy of the fixture's model in the build tree, removed when done.
struct TempModel {
  fs::path dir;
  explicit TempModel(const std::string& name) : dir(fs::path(SLUICE_BINARY).parent_path() / name) {
    fs::remove_all(dir);
    fs::copy(kFixture, dir);
  }
  ~TempModel() { fs::remove_all(dir); }
};

// The message of the sluice::Error f throws ("" if none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace sluice::pack_test
