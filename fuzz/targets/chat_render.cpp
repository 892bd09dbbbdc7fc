// The chat renderer's inputs: {"messages": [...], "tools", "tool_choice",
// "response_format", "thinking", "reasoning_effort"} as a request carries them.
#include "base/error.h"
#include "base/json_parse.h"
#include "fuzz/fuzz_util.h"
#include "text/chat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  try {
    const json doc = sluice::parse_json(sluice::fuzz::as_text(data, size), "request");
    if (!doc.is_object()) return 0;
    sluice::text::ChatOptions o;
    o.tools = doc.value("tools", json());
    o.tool_choice = doc.value("tool_choice", json());
    o.response_format = doc.value("response_format", json());
    if (auto it = doc.find("thinking"); it != doc.end() && it->is_boolean()) o.thinking = it->get<bool>();
    if (auto it = doc.find("reasoning_effort"); it != doc.end() && it->is_string())
      o.reasoning_effort = it->get<std::string>();
    const json messages = doc.value("messages", json::array());
    const std::string text = sluice::text::render_chat_text(messages, o);
    (void)sluice::text::python_json(messages, true);
  } catch (const sluice::Error&) {
  }
  return 0;
}
