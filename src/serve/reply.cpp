#include "serve/reply.h"

namespace sluice::serve {

ReplyBuilder::ReplyBuilder(const text::Tokenizer& tok, ReplyOptions opt)
    : tok_(tok),
      opt_(std::move(opt)),
      dec_(tok, /*show_special=*/true),  // the reply splitter reads the markers as text
      split_(opt_.thinking),
      stop_(opt_.stop) {}

void ReplyBuilder::take(const std::string& text, bool final, Piece& out) {
  if (opt_.chat) {
    text::ReplyStream::Delta d = split_.push(text);
    if (final) {
      text::ReplyStream::Delta f = split_.finish();
      d.reasoning += f.reasoning;
      d.content += f.content;
    }
    out.reasoning += d.reasoning;
    out.content += stop_.push(d.content);
  } else {
    out.content += stop_.push(text);
  }
  if (final) out.content += stop_.flush();
}

Verdict ReplyBuilder::push(const TokenEvent& ev, Piece& out) {
  if (ev.is_stop_id || stop_.matched()) return Verdict::go;  // stop ids are never text
  if (opt_.logprobs) {
    TokenInfo t;
    t.bytes = std::string(tok_.token_bytes(ev.id));
    t.logprob = ev.logprob;
    for (const TokenLogprob& a : ev.top) t.top.push_back({std::string(tok_.token_bytes(a.id)), a.logprob});
    out.logprobs.push_back(std::move(t));
  }
  if (opt_.chat && opt_.thinking && !split_.parts().reasoning_done) reasoning_tokens_++;
  take(dec_.push(ev.id), false, out);
  return stop_.matched() ? Verdict::stop : Verdict::go;
}

void ReplyBuilder::finish(Piece& out) {
  if (stop_.matched()) return;
  take(dec_.flush(), true, out);
  if (opt_.chat) tool_calls_ = split_.parts().tool_calls;
}

}  // namespace sluice::serve
