#include "arch/open.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/read_file.h"
#include "k3/k3_model.h"
#include "k3/k3_preview.h"
#include "k3/state.h"

namespace sluice {
namespace {

using Opener = std::unique_ptr<Model> (*)(const std::string& dir, const ModelOptions& opt);

struct Architecture {
  const char* model_type;  // config.json's
  Opener open;
};

// K3.1 Pro is K3's code with DSA layers (checkpoint/config.h parses both).
constexpr Architecture kArchitectures[] = {
    {"kimi_k3", open_k3},
    {"kimi_k31", open_k3},
    {"kimi_linear", open_k3},  // K3's text model as a flat config
};

// config.json's model_type; empty when it cannot be read (missing, not a
// regular file, too large, not JSON: the opener then reports what is wrong, as
// it always has).
std::string model_type(const std::string& dir) {
  std::string text;
  try {
    text = read_regular_file(dir + "/config.json", 16ull << 20);
  } catch (const Error&) {
    return "";
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("model_type") || !j["model_type"].is_string()) return "";
  return j["model_type"].get<std::string>();
}

}  // namespace

std::unique_ptr<Model> open_model(const std::string& dir, const ModelOptions& opt) {
  const std::string type = model_type(dir);
  for (const Architecture& a : kArchitectures)
    if (type == a.model_type) return a.open(dir, opt);
  // Unknown or unreadable: K3's checkpoint parser names what it expected.
  return open_k3(dir, opt);
}

uint64_t new_state_bytes(const ModelConfig& c) { return SequenceState::create(c).bytes(); }

std::unique_ptr<ModelPreview> preview_model(const Checkpoint& ck, const ModelOptions& o, double lossless_ratio,
                                            const std::string& ratio_basis) {
  return preview_k3(ck, o, lossless_ratio, ratio_basis);
}

Checkpoint preset_checkpoint(const std::string& preset) { return k3_preset_checkpoint(preset); }

}  // namespace sluice
