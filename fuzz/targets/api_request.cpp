// The server's request parsing: depth check, JSON, then both endpoints' contracts.
#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice::serve;
  const std::string_view text = sluice::fuzz::as_text(data, size);
  Limits lim;
  lim.model_id = "sluice";
  lim.vocab_size = 1000;
  lim.context_length = 4096;
  try {
    check_json_depth(text, 64);
    const json body = json::parse(text, nullptr, false);
    if (body.is_discarded()) return 0;
    for (int e = 0; e < 2; e++) {
      try {
        GenerationRequest r = e ? parse_completion_request(body, lim) : parse_chat_request(body, lim);
        (void)r;
      } catch (const ApiError&) {
      }
    }
  } catch (const ApiError&) {
  } catch (const sluice::Error&) {
  }
  return 0;
}
