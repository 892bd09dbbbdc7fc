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
    const std::string e = it->is_string() ? it->get<std::string>() : "";
    if (e != "none" && e != "low" && e != "medium" && e != "high" && e != "max")
      fail(path, "reasoning_effort must be none, low, medium, high or max");
    d.reasoning_effort = e;
  }
  if (auto it = j.find("max_new_tokens"); it != j.end()) {
    if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > (1 << 30))
      fail(path, "max_new_tokens must be a positive integer");
    d.max_new_tokens = int(it->get<long long>());
  }
  const bool sample = !j.contains("do_sample") || j["do_sample"] != false;
  // The ranges the sampler accepts (engine/sampler.h), refused here naming the file.
  if (auto it = j.find("temperature"); it != j.end() && sample) {
    if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 1e6))
      fail(path, "temperature must be a number from 0 to 1e6");
    d.temperature = it->get<float>();
  }
  if (auto it = j.find("top_p"); it != j.end() && sample) {
    // (1e-50 is positive as a double but 0 as the float the sampler keeps.)
    if (!it->is_number() || !(it->get<double>() > 0 && it->get<double>() <= 1) || it->get<float>() == 0)
      fail(path, "top_p must be a number in (0, 1]");
    d.top_p = it->get<float>();
  }
  return d;
}

}  // namespace sluice::cli
