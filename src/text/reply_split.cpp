// text/reply_split.cpp — splitting a generated reply into reasoning, content and
// the markup tail (ReplyStream, split_reasoning; see chat.h).
#include <algorithm>

#include "text/chat.h"

namespace sluice::text {

namespace {

const std::string kThinkEnd = "<|close|>think<|sep|>";
const std::string kResponseOpen = "<|open|>response<|sep|>";
// Anything after the response channel: its close, a tools block, the message end.
const std::vector<std::string> kContentEnds = {"<|close|>response<|sep|>", "<|open|>tools<|sep|>",
                                               "<|close|>message<|sep|>", "<|end_of_msg|>", "[EOS]"};
const std::vector<std::string> kReasoningEnds = {"<|close|>message<|sep|>", "<|end_of_msg|>", "[EOS]"};

struct Found {
  size_t at = std::string::npos;  // earliest full marker
  size_t len = 0;
  size_t hold = std::string::npos;  // start of a trailing partial marker
};

Found find_markers(const std::string& buf, const std::vector<const std::string*>& markers) {
  Found f;
  for (const std::string* m : markers) {
    size_t at = buf.find(*m);
    if (at != std::string::npos && at < f.at) f.at = at, f.len = m->size();
    // Longest proper prefix of m that ends buf.
    for (size_t k = std::min(m->size() - 1, buf.size()); k > 0; k--) {
      if (buf.compare(buf.size() - k, k, *m, 0, k) == 0) {
        f.hold = std::min(f.hold, buf.size() - k);
        break;
      }
    }
  }
  return f;
}

}  // namespace

ReplyStream::ReplyStream(bool thinking) : phase_(thinking ? Phase::reasoning : Phase::content) {}

ReplyStream::Delta ReplyStream::push(std::string_view text) {
  buf_ += text;
  return advance(false);
}

ReplyStream::Delta ReplyStream::finish() {
  Delta d = advance(true);
  parts_.tool_calls = parse_tool_calls(parts_.tail);
  return d;
}

ReplyStream::Delta ReplyStream::advance(bool final) {
  Delta d;
  while (true) {
    if (phase_ == Phase::tail) {
      parts_.tail += buf_;
      buf_.clear();
      return d;
    }
    if (phase_ == Phase::response_open) {  // skip <|open|>response<|sep|> right after </think>
      if (buf_.compare(0, kResponseOpen.size(), kResponseOpen) == 0) {
        buf_.erase(0, kResponseOpen.size());
      } else if (!final && buf_.size() < kResponseOpen.size() &&
                 kResponseOpen.compare(0, buf_.size(), buf_) == 0) {
        return d;  // might still become the marker
      }
      phase_ = Phase::content;
      continue;
    }
    std::vector<const std::string*> markers;
    if (phase_ == Phase::reasoning) markers.push_back(&kThinkEnd);
    for (auto& m : phase_ == Phase::reasoning ? kReasoningEnds : kContentEnds) markers.push_back(&m);
    Found f = find_markers(buf_, markers);
    std::string& channel = phase_ == Phase::reasoning ? parts_.reasoning : parts_.content;
    std::string& delta = phase_ == Phase::reasoning ? d.reasoning : d.content;
    if (f.at != std::string::npos) {
      std::string piece = buf_.substr(0, f.at);
      channel += piece, delta += piece;
      bool think_end = phase_ == Phase::reasoning && buf_.compare(f.at, f.len, kThinkEnd) == 0;
      if (think_end) {
        buf_.erase(0, f.at + f.len);
        parts_.reasoning_done = true;
        phase_ = Phase::response_open;
      } else {
        buf_.erase(0, f.at);  // the marker starts the tail
        phase_ = Phase::tail;
      }
      continue;
    }
    size_t keep = final ? buf_.size() : std::min(f.hold, buf_.size());
    channel.append(buf_, 0, keep), delta.append(buf_, 0, keep);
    buf_.erase(0, keep);
    return d;
  }
}

ReplyParts split_reasoning(std::string_view reply, bool thinking) {
  ReplyStream rs(thinking);
  rs.push(reply);
  rs.finish();
  return rs.parts();
}

}  // namespace sluice::text
