// config.json: the JSON text, then the model config contract.
#include "base/error.h"
#include "base/json_parse.h"
#include "checkpoint/config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json doc = sluice::parse_json(sluice::fuzz::as_text(data, size), "config.json");
    sluice::ModelConfig c = sluice::parse_model_config(doc, "config.json");
    (void)c.expert_span_bytes();
    (void)c.kda_dim();
    (void)c.shared_intermediate();
    for (int l = 0; l < c.num_hidden_layers; l++) (void)c.is_kda_layer(l);
  } catch (const sluice::Error&) {
  }
  return 0;
}
