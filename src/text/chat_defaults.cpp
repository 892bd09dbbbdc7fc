// text/chat_defaults.cpp — generation_config.json's defaults (text/chat_defaults.h).
#include "text/chat_defaults.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sluice::text {

std::string thinking_effort(std::string_view e) {
  if (e == "none" || e == "low" || e == "high" || e == "max") return std::string(e);
  if (e == "medium") return "high";
  return "";
}

ChatDefaults chat_defaults(const std::string& model_dir) {
  ChatDefaults d;
  const std::string path = model_dir + "/generation_config.json";
  std::ifstream f(path);
  if (!f) return d;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(path, "not a JSON object");
  if (auto it = j.find("reasoning_effort"); it != j.end()) {
    if (!it->is_string()) fail(path, "reasoning_effort must be a string");
    d.reasoning_effort = thinking_effort(it->get<std::string>());
    if (d.reasoning_effort.empty())
      fail(path, "reasoning_effort must be none, low, medium, high or max, not '" + it->get<std::string>() + "'");
  }
  if (auto it = j.find("max_new_tokens"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > (1 << 30))
      fail(path, "max_new_tokens must be a positive integer");
    d.max_new_tokens = int(it->get<long long>());
  }
  bool sample = true;
  if (auto it = j.find("do_sample"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) fail(path, "do_sample must be true or false");
    sample = it->get<bool>();
  }
  for (auto [key, out, hi] : {std::tuple{"temperature", &d.temperature, 2.0}, std::tuple{"top_p", &d.top_p, 1.0}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    // (top_p 1e-50 is positive as a double but 0 as the float the sampler keeps.)
    if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= hi) || (hi == 1.0 && it->get<float>() == 0))
      fail(path, std::string(key) + (hi == 1.0 ? " must be a number in (0, 1]" : " must be a number from 0 to 2"));
    *out = it->get<float>();
  }
  if (!sample) d.temperature = 0;  // greedy: top_p changes nothing then
  return d;
}

}  // namespace sluice::text
