// tiktoken.model + tokenizer_config.json (input: the two files separated by
// "\n=====\n"); a vocabulary that loads must encode and decode.
#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [model, config] = sluice::fuzz::split2(sluice::fuzz::as_text(data, size));
  sluice::fuzz::MemFile m(model), c(config);
  try {
    auto tok = sluice::text::Tokenizer::from_files(m.path, config.empty() ? "" : c.path, sluice::text::kK3Pattern,
                                                   true);
    const std::string sample = "Hello, world! <|im_end|> 12345 \xe4\xbd\xa0\xe5\xa5\xbd \xff";
    for (bool special : {false, true}) {
      std::vector<int> ids = tok.encode(sample, special);
      for (int id : ids) (void)tok.token_bytes(id);
    }
  } catch (const sluice::Error&) {
  }
  return 0;
}
