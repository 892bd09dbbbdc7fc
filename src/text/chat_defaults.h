// text/chat_defaults.h — a model's own generation defaults, shared by `run` and `serve`.
//
// Read from the model directory's generation_config.json (the Hugging Face
// file for generation defaults) when it has them:
//   "max_new_tokens": 512              a chat reply's length bound
//   "temperature": 1.0, "top_p": 0.95  sampling ("do_sample": false means greedy)
//   "reasoning_effort": "none"         sluice's key: none, low, medium, high or max
// A request (or a command-line flag) overrides each of them. Without the file, or
// a key: effort max (K3's template default), no length of its own (the caller's),
// temperature 1 and top-p 1 (OpenAI's API defaults, what an OpenAI client expects).
// A small model trained on plain text (nanoK3) never closes a thinking block and
// repeats itself when greedy, so its file says "none" and samples: a chat, and
// the first request of an OpenAI client, get an answer.
#pragma once
#include <string>
#include <string_view>

namespace sluice::text {

struct ChatDefaults {
  std::string reasoning_effort = "max";  // none | low | high | max (thinking_effort() spellings)
  int max_new_tokens = 0;                // 0: the file does not say
  float temperature = 1, top_p = 1;
};

// Throws naming the file when it exists but is not valid JSON or holds a wrong type or value.
ChatDefaults chat_defaults(const std::string& model_dir);

// The effort K3's chat encoder is given for a requested one: none, low, high and max
// stay; "medium" becomes "high". Anything else gives "".
// Why medium -> high: the official encoder (encoding_k3.py, as two independent ports
// read it) takes low | high | max, although the effort message's text lists
// `medium` too (docs/k3-spec.md §6.3, §9.3). OpenAI clients send "medium" as their
// ordinary effort; relays that serve models with fewer levels round such a request
// to a level the model was trained with, and rounding up keeps at least the
// thinking asked for (as "minimal" is taken as "low").
std::string thinking_effort(std::string_view requested);

}  // namespace sluice::text
