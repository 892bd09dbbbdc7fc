// Streaming detokenization (text/detokenizer.h) and the UTF-8 scanner under it
// (text/utf8.h), with the bundled nanoK3 vocabulary. The input is a list of
// u16 token ids (taken modulo the vocabulary size + 16, so some are out of
// range). Pushing them one at a time, then flushing, must give exactly
// decode() of the ids that push accepted, for both show_special settings;
// the held-back tail is at most 3 bytes. The input's raw bytes also go
// through utf8_lossy (always valid UTF-8) and utf8_valid_prefix.
#include <cstring>
#include <vector>

#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

using namespace sluice::text;

const Tokenizer& tok() {
  static const Tokenizer t = Tokenizer::load(SLUICE_FUZZ_ROOT "/models/nanok3");
  return t;
}

void check_utf8(std::string_view s) {
  const std::string lossy = utf8_lossy(s);
  if (utf8_valid_prefix(lossy) != lossy.size()) __builtin_trap();
  const size_t valid = utf8_valid_prefix(s);
  if (valid > s.size() || utf8_lossy(s.substr(0, valid)) != s.substr(0, valid)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& t = tok();
  check_utf8(sluice::fuzz::as_text(data, size));
  for (bool show_special : {true, false}) {
    StreamDecoder d(t, show_special);
    std::vector<int> taken;
    std::string streamed;
    for (size_t i = 0; i + 1 < size; i += 2) {
      uint16_t v;
      std::memcpy(&v, data + i, 2);
      const int id = int(v % uint32_t(t.vocab_size() + 16));
      try {
        streamed += d.push(id);
      } catch (const sluice::Error&) {
        if (id < t.vocab_size()) __builtin_trap();  // only a bad id is refused
        continue;
      }
      taken.push_back(id);
      if (d.pending() > 3) __builtin_trap();
    }
    streamed += d.flush();
    if (d.pending() != 0 || streamed != t.decode(taken, show_special)) __builtin_trap();
  }
  return 0;
}
