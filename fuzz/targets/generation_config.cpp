// A model's generation_config.json (text/chat_defaults.h), read from a model
// directory: either refused with an error naming the file, or defaults the
// rest of `sluice run` accepts (a known reasoning effort, a positive token
// bound or 0 for none, the sampler's ranges: engine/sampler.h).
#include <stdlib.h>

#include <cmath>
#include <fstream>

#include "base/error.h"
#include "text/chat_defaults.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = sluice::fuzz::scratch_dir();
  {
    std::ofstream f(dir + "/generation_config.json", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    const sluice::text::ChatDefaults d = sluice::text::chat_defaults(dir);
    const std::string& e = d.reasoning_effort;
    if (e != "none" && e != "low" && e != "medium" && e != "high" && e != "max") __builtin_trap();
    if (d.max_new_tokens < 0 || !std::isfinite(d.temperature) || d.temperature < 0) __builtin_trap();  // 0: the file does not say
    if (!(d.top_p > 0 && d.top_p <= 1)) __builtin_trap();
  } catch (const sluice::Error& e) {
    if (std::string(e.what()).find("generation_config.json") == std::string::npos) __builtin_trap();
  }
  return 0;
}
