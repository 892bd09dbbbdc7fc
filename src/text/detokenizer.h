// text/detokenizer.h — streaming decoder for generated ids.
//
// A token may end in the middle of a UTF-8 sequence (byte-level BPE), so text is
// released only up to the last complete character; the incomplete tail waits for
// the next token. Ill-formed bytes become U+FFFD exactly as Tokenizer::decode
// does, so the concatenation of every push() and the final flush() equals
// decode() of all ids. Nothing is lost: flush() releases what is still held.
#pragma once
#include <string>

#include "text/tokenizer.h"

namespace sluice::text {

// tok must outlive the decoder.
struct StreamDecoder {
  explicit StreamDecoder(const Tokenizer& tok, bool show_special = true)
      : tok_(tok), show_special_(show_special) {}

  // Text that became complete with this id (often empty mid-character).
  std::string push(int id);
  // Everything still held (an unfinished sequence becomes U+FFFD); resets the state.
  std::string flush();
  // Bytes held back waiting for the rest of a character (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer& tok_;
  bool show_special_;
  std::string pending_;
};

}  // namespace sluice::text
