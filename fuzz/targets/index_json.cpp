// model.safetensors.index.json.
#include "base/error.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/index_json.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> weight_map;
  try {
    sluice::parse_index_json(sluice::fuzz::as_text(data, size), "model.safetensors.index.json", &weight_map);
  } catch (const sluice::Error&) {
  }
  return 0;
}
