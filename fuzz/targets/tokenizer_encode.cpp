// Tokenizer::encode on arbitrary text, with the bundled nanoK3 vocabulary
// (models/nanok3: K3's split pattern, safety splits and special tokens).
// Byte-level BPE round-trips any bytes: decode_bytes(encode(text)) == text,
// with and without special tokens allowed, and every id is in the vocabulary.
#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "text/tokenizer.h"

namespace {

const sluice::text::Tokenizer& tok() {
  static const sluice::text::Tokenizer t = sluice::text::Tokenizer::load(SLUICE_FUZZ_ROOT "/models/nanok3");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = sluice::fuzz::as_text(data, size);
  const auto& t = tok();
  for (bool special : {false, true}) {
    const std::vector<int> ids = t.encode(text, special);
    for (int id : ids)
      if (id < 0 || id >= t.vocab_size() || (!special && t.is_special(id))) __builtin_trap();
    if (t.decode_bytes(ids) != text) __builtin_trap();
  }
  return 0;
}
