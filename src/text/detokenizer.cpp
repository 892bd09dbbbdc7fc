// text/detokenizer.cpp — see detokenizer.h.
#include "text/detokenizer.h"

#include "text/utf8.h"

namespace sluice::text {

std::string StreamDecoder::push(int id) {
  std::string_view bytes = tok_.token_bytes(id);  // throws on a bad id, before any state change
  if (tok_.is_special(id) && !show_special_) return {};
  pending_ += bytes;
  // Release everything but a trailing sequence that is a valid prefix of a character.
  auto* u = reinterpret_cast<const unsigned char*>(pending_.data());
  size_t i = 0, keep_from = pending_.size();
  while (i < pending_.size()) {
    Utf8Step st = utf8_step(u + i, pending_.size() - i);
    if (st.kind == Utf8Kind::truncated) {
      keep_from = i;
      break;
    }
    i += st.len;
  }
  std::string out = utf8_lossy(std::string_view(pending_).substr(0, keep_from));
  pending_.erase(0, keep_from);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace sluice::text
