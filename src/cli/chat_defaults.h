// cli/chat_defaults.h — a model's own defaults for a chat turn.
//
// Read from the model directory's generation_config.json (the Hugging Face
// file for generation defaults) when it has them:
//   "max_new_tokens": 512          the reply's length bound
//   "temperature": 0.8, "top_p": 0.9   sampling (ignored when "do_sample" is false)
//   "reasoning_effort": "none"     sluice's key: none, low, medium, high or max
// A model without the file, or without a key, gets K3's defaults (max, 4096,
// greedy). A small model trained on plain text (nanoK3) never closes a
// thinking block and repeats itself when greedy, so its file says "none" and
// samples: the chat prints an answer on the first try.
#pragma once
#include <string>

namespace sluice::cli {

struct ChatDefaults {
  std::string reasoning_effort = "max";
  int max_new_tokens = 4096;
  float temperature = 0, top_p = 1;
};

// Throws naming the file when it exists but is not valid JSON or holds a wrong type.
ChatDefaults chat_defaults(const std::string& model_dir);

}  // namespace sluice::cli
