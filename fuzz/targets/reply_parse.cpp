// The model-reply parser: any bytes a model writes split into reasoning,
// content and tool calls; streamed in pieces it gives what the whole reply
// gives, and the tool calls always serialize as JSON.
#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "text/chat.h"
#include "text/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool thinking = data[0] & 1;
  const size_t step = 1 + data[0] / 2;
  const std::string_view reply = sluice::fuzz::as_text(data + 1, size - 1);
  const sluice::text::ReplyParts whole = sluice::text::split_reasoning(reply, thinking);
  sluice::text::ReplyStream rs(thinking);
  std::string reasoning, content;
  for (size_t at = 0; at < reply.size(); at += step) {
    auto d = rs.push(reply.substr(at, step));
    reasoning += d.reasoning, content += d.content;
  }
  auto d = rs.finish();
  reasoning += d.reasoning, content += d.content;
  if (reasoning != whole.reasoning || content != whole.content) __builtin_trap();
  if (rs.parts().tool_calls != whole.tool_calls) __builtin_trap();
  (void)whole.tool_calls.dump();  // throws on invalid UTF-8: a finding
  if (sluice::text::utf8_valid_prefix(reply) == reply.size()) {
    nlohmann::json out = {{"reasoning", whole.reasoning}, {"content", whole.content}};
    (void)out.dump();
  }
  return 0;
}
