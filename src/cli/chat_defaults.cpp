#include "cli/chat_defaults.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sluice::cli {

ChatDefaults chat_defaults(const std::string& model_dir) {
  ChatDefaults d;
  const std::string path = model_dir + "/generation_config.json";
  std::ifstream f(path);
  if (!f) return d;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(path, "not a JSON object");
  if (auto it = j.find("reasoning_effort"); it != j.end()) {
    if (!it->is_string()) fail(path, "reasoning_effort must be a string");
    d.reasoning_effort = it->get<std::string>();
  }
  if (auto it = j.find("max_new_tokens"); it != j.end()) {
    if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > (1 << 30))
      fail(path, "max_new_tokens must be a positive integer");
    d.max_new_tokens = int(it->get<long long>());
  }
  const bool sample = !j.contains("do_sample") || j["do_sample"] != false;
  for (auto [key, out] : {std::pair{"temperature", &d.temperature}, std::pair{"top_p", &d.top_p}}) {
    auto it = j.find(key);
    if (it == j.end() || !sample) continue;
    if (!it->is_number() || it->get<double>() < 0) fail(path, std::string(key) + " must be a non-negative number");
    *out = it->get<float>();
  }
  return d;
}

}  // namespace sluice::cli
