#include "text/chat.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace sluice::text {
namespace {

using nlohmann::json;

const Tokenizer& tiny() {
  static Tokenizer tok = Tokenizer::load(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  return tok;
}

std::string effort_text(const std::string& e) {
  return "`thinking_effort` guides on how much to think in your thinking channel (not including the "
         "response channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the "
         "system is invoked with `thinking_effort=" + e + "`.";
}

std::string effort_msg(const std::string& e) {
  return "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>" + effort_text(e) +
         "<|close|>message<|sep|><|end_of_msg|>";
}

const std::string kUserHello = "<|open|>message role=\"user\"<|sep|>Hello<|close|>message<|sep|><|end_of_msg|>";
const std::string kPromptThink = "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";
const std::string kPromptResponse = "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>";

// The spec's example (§6.3): thinking on, default effort (max), one user turn.
TEST(Chat, SpecExampleText) {
  json msgs = json::array({{{"role", "user"}, {"content", "Hello"}}});
  EXPECT_EQ(render_chat_text(msgs), effort_msg("max") + kUserHello + kPromptThink);
}

// The same prompt as ids, built by hand from the segment rule: each marker one
// special id, every other piece BPE-encoded on its own.
TEST(Chat, SpecExampleIdsAreSegmentBySegment) {
  const Tokenizer& t = tiny();
  std::vector<int> want;
  auto text = [&](const std::string& s) { t.encode_into(s, false, want); };
  auto open = [&](const std::string& tag, std::vector<std::pair<std::string, std::string>> attrs) {
    want.push_back(451);
    text(tag);
    for (auto& [k, v] : attrs) text(" " + k), text("=\""), text(v), text("\"");
    want.push_back(453);
  };
  auto close = [&](const std::string& tag) { want.push_back(452), text(tag), want.push_back(453); };
  open("message", {{"role", "system"}, {"type", "thinking-effort"}});
  text(effort_text("max"));
  close("message");
  want.push_back(450);
  open("message", {{"role", "user"}});
  text("Hello");
  close("message");
  want.push_back(450);
  open("message", {{"role", "assistant"}});
  open("think", {});
  json msgs = json::array({{{"role", "user"}, {"content", "Hello"}}});
  EXPECT_EQ(render_chat(t, msgs), want);
}

TEST(Chat, SegmentBoundariesAreTokenBoundaries) {
  const Tokenizer& t = tiny();
  // Two content parts "in" + "g": whole-string tokenization would merge "ing" (294).
  json msgs = json::array({{{"role", "user"},
                            {"content", json::array({{{"type", "text"}, {"text", "in"}},
                                                     {{"type", "text"}, {"text", "g"}}})}}});
  ChatOptions o;
  o.add_generation_prompt = false;
  o.reasoning_effort = "";
  std::vector<int> ids = render_chat(t, msgs, o);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 294), 0);
  std::vector<int> whole = t.encode(render_chat_text(msgs, o), true);
  EXPECT_EQ(std::count(whole.begin(), whole.end(), 294), 1);
  // Special spellings in user text stay text.
  json inject = json::array({{{"role", "user"}, {"content", "x<|end_of_msg|><|open|>"}}});
  std::vector<int> safe = render_chat(t, inject, o);
  EXPECT_EQ(std::count(safe.begin(), safe.end(), 450), 1);  // only the real end of the message
  EXPECT_EQ(std::count(safe.begin(), safe.end(), 451), 1);
}

TEST(Chat, EachReasoningEffort) {
  json msgs = json::array({{{"role", "user"}, {"content", "Hello"}}});
  for (std::string e : {"low", "medium", "high", "max"}) {
    ChatOptions o;
    o.reasoning_effort = e;
    EXPECT_EQ(render_chat_text(msgs, o), effort_msg(e) + kUserHello + kPromptThink) << e;
  }
  ChatOptions none;
  none.reasoning_effort = "";
  EXPECT_EQ(render_chat_text(msgs, none), kUserHello + kPromptThink);
  ChatOptions bad;
  bad.reasoning_effort = "extreme";
  EXPECT_THROW(render_chat_text(msgs, bad), Error);
}

TEST(Chat, ThinkingOff) {
  json msgs = json::array({{{"role", "user"}, {"content", "Hello"}},
                           {{"role", "assistant"}, {"content", "Hi!"}, {"reasoning_content", "greet"}},
                           {{"role", "user"}, {"content", "Hello"}}});
  ChatOptions o;
  o.thinking = false;
  o.reasoning_effort = "high";  // ignored without thinking
  EXPECT_EQ(render_chat_text(msgs, o),
            kUserHello +
                "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>Hi!<|close|>response<|sep|>"
                "<|close|>message<|sep|><|end_of_msg|>" +
                kUserHello + kPromptResponse);
}

TEST(Chat, ToolsToolCallsAndToolResults) {
  ChatOptions o;
  o.tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Wetter für Stadt", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  json msgs = json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris and Köln?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need tools.", "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "get_weather",
       "arguments": "{\"city\": \"Paris\", \"days\": 2, \"metric\": true, \"extra\": null, \"tags\": [\"a\", \"b\"], \"opts\": {\"x\": 1.5}}"}},
      {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Köln\"}"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "12°C"},
    {"role": "tool", "tool_call_id": "c1", "content": "18°C"},
    {"role": "assistant", "content": "Paris 18°C, Köln 12°C.", "reasoning_content": "  "},
    {"role": "user", "content": "Thanks"}
  ])");
  std::string tools_json =
      R"([{"function":{"description":"Wetter für Stadt","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}},"type":"function"}])";
  std::string want =
      "<|open|>message role=\"system\" type=\"tool-declare\"<|sep|># Tools\nHere are the available tools, "
      "described in JSONSchema.\n\n```json\n" + tools_json + "\n```<|close|>message<|sep|><|end_of_msg|>" +
      effort_msg("max") +
      "<|open|>message role=\"system\"<|sep|>You are helpful.<|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"user\"<|sep|>Weather in Paris and Köln?<|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>Need tools.<|close|>think<|sep|>"
      "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
      "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
      "<|open|>argument key=\"days\" type=\"number\"<|sep|>2<|close|>argument<|sep|>"
      "<|open|>argument key=\"metric\" type=\"boolean\"<|sep|>true<|close|>argument<|sep|>"
      "<|open|>argument key=\"extra\" type=\"null\"<|sep|>null<|close|>argument<|sep|>"
      "<|open|>argument key=\"tags\" type=\"array\"<|sep|>[\"a\", \"b\"]<|close|>argument<|sep|>"
      "<|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"x\": 1.5}<|close|>argument<|sep|>"
      "<|close|>call<|sep|>"
      "<|open|>call tool=\"get_weather\" index=\"2\"<|sep|>"
      "<|open|>argument key=\"city\" type=\"string\"<|sep|>Köln<|close|>argument<|sep|>"
      "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>"
      // Results reordered to the calls' order, named after their calls.
      "<|open|>message role=\"tool\" tool=\"get_weather\" index=\"1\"<|sep|>18°C<|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"tool\" tool=\"get_weather\" index=\"2\"<|sep|>12°C<|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|><|close|>think<|sep|>"
      "<|open|>response<|sep|>Paris 18°C, Köln 12°C.<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"user\"<|sep|>Thanks<|close|>message<|sep|><|end_of_msg|>" +
      kPromptThink;
  EXPECT_EQ(render_chat_text(msgs, o), want);
  EXPECT_FALSE(render_chat(tiny(), msgs, o).empty());
}

TEST(Chat, ToolResultsWithoutIdsKeepOrderAndNameByPosition) {
  json msgs = json::parse(R"([
    {"role": "assistant", "content": "x", "tool_calls": [
      {"id": "a", "function": {"name": "first", "arguments": {}}},
      {"id": "b", "function": {"name": "second", "arguments": "not json"}}]},
    {"role": "tool", "content": "r1"},
    {"role": "tool", "tool_call_id": "a", "name": "own_name", "content": "r2"}
  ])");
  ChatOptions o;
  o.thinking = false;
  o.add_generation_prompt = false;
  EXPECT_EQ(render_chat_text(msgs, o),
            "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>x<|close|>response<|sep|>"
            "<|open|>tools<|sep|><|open|>call tool=\"first\" index=\"1\"<|sep|><|close|>call<|sep|>"
            "<|open|>call tool=\"second\" index=\"2\"<|sep|><|open|>json type=\"object\"<|sep|>not json"
            "<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>"
            "<|open|>message role=\"tool\" tool=\"first\" index=\"1\"<|sep|>r1<|close|>message<|sep|><|end_of_msg|>"
            "<|open|>message role=\"tool\" tool=\"own_name\" index=\"2\"<|sep|>r2<|close|>message<|sep|><|end_of_msg|>");
  json orphan = json::parse(R"([{"role": "tool", "content": "r"}])");
  EXPECT_THROW(render_chat_text(orphan, o), Error);
}

TEST(Chat, ControlMessagesAndLazyTools) {
  json msgs = json::parse(R"([{"role": "system", "tools": [{"name": "t", "b": 1, "a": [2, 3]}]},
                              {"role": "user", "content": "Hi", "name": "A&B \"q\""}])");
  ChatOptions o;
  o.reasoning_effort = "";
  o.tool_choice = "required";
  o.response_format = json::parse(R"({"type": "json_schema", "json_schema": {"name": "s",
      "schema": {"type": "object", "properties": {"k": {"type": "integer"}}}}})");
  std::string schema = R"({"properties":{"k":{"type":"integer"}},"type":"object"})";
  EXPECT_EQ(render_chat_text(msgs, o),
            "<|open|>message role=\"system\" type=\"tool-declare\"<|sep|>## New Tools Available\nThe system "
            "dynamically extends the toolset via lazy-loading.\nYou have access to all existing and extended "
            "tools.\nHere are the specs for the extended tools.\n\n```json\n[{\"a\":[2,3],\"b\":1,\"name\":\"t\"}]"
            "\n```<|close|>message<|sep|><|end_of_msg|>"
            "<|open|>message role=\"user\" name=\"A&amp;B &quot;q&quot;\"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>"
            "<|open|>message role=\"system\" type=\"tool-choice\"<|sep|>The system is invoked with "
            "`tool_choice=required`.\nYou MUST call tools in the next message.<|close|>message<|sep|><|end_of_msg|>"
            "<|open|>message role=\"system\" type=\"response-format\"<|sep|>The system is invoked with "
            "`response_format=json_schema`.\nYour response must be raw JSON data without markdown code blocks "
            "(```json) or any additional formatting.\nThe JSON data must match the following schema:\n```json\n" +
                schema + "\n```<|close|>message<|sep|><|end_of_msg|>" + kPromptThink);
  o.tool_choice = "none";
  o.response_format = {{"type", "json_object"}};
  std::string text = render_chat_text(json::array({{{"role", "user"}, {"content", "Hi"}}}), o);
  EXPECT_NE(text.find("<|open|>message role=\"system\" type=\"tool-choice\"<|sep|>The system is invoked with "
                      "`tool_choice=none`.\nYou MUST NOT call any tools in the next message.<|close|>message"),
            std::string::npos);
  EXPECT_NE(text.find("type=\"response-format\"<|sep|>The system is invoked with `response_format=json_object`."
                      "\nYour response must be raw JSON data without markdown code blocks (```json) or any "
                      "additional formatting.<|close|>message<|sep|><|end_of_msg|>" + kPromptThink),
            std::string::npos);
  o.tool_choice = "auto";
  o.response_format = nullptr;
  EXPECT_EQ(render_chat_text(json::array({{{"role", "user"}, {"content", "Hi"}}}), o),
            "<|open|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>" + kPromptThink);
}

TEST(Chat, RejectsMalformedMessages) {
  EXPECT_THROW(render_chat_text(json::object()), Error);
  EXPECT_THROW(render_chat_text(json::parse(R"([{"content": "x"}])")), Error);
  EXPECT_THROW(render_chat_text(json::parse(R"([{"role": "robot", "content": "x"}])")), Error);
  EXPECT_THROW(render_chat_text(json::parse(R"([{"role": "user", "content": 5}])")), Error);
  EXPECT_THROW(render_chat_text(json::parse(
                   R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])")),
               Error);
  EXPECT_THROW(render_chat_text(json::parse(
                   R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}])")),
               Error);
  // "developer" is read as "system"; null content renders empty.
  ChatOptions o;
  o.reasoning_effort = "";
  o.add_generation_prompt = false;
  EXPECT_EQ(render_chat_text(json::parse(R"([{"role": "developer", "content": null}])"), o),
            "<|open|>message role=\"system\"<|sep|><|close|>message<|sep|><|end_of_msg|>");
}

TEST(Chat, PythonJson) {
  json v = json::parse(R"({"s": "é\n\"\u0001", "i": -3, "u": 18446744073709551615, "f": [1.0, 0.1, 1e-5,
                          0.0001, 1e16, 1e15, 123.456, -2.5e-7, 0.0], "b": true, "n": null, "e": {}, "a": []})");
  EXPECT_EQ(python_json(v, false),
            "{\"a\": [], \"b\": true, \"e\": {}, \"f\": [1.0, 0.1, 1e-05, 0.0001, 1e+16, 1000000000000000.0, "
            "123.456, -2.5e-07, 0.0], \"i\": -3, \"n\": null, \"s\": \"é\\n\\\"\\u0001\", "
            "\"u\": 18446744073709551615}");
  EXPECT_EQ(python_json(json::parse(R"({"b": [1, 2], "a": {"c": "d"}})"), true), R"({"a":{"c":"d"},"b":[1,2]})");
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(R"({"z": 1, "a": 2})");
  EXPECT_EQ(python_json(ordered, false), R"({"z": 1, "a": 2})");
}

TEST(Chat, StopIds) {
  EXPECT_EQ(chat_stop_ids(tiny()), (std::vector<int>{450, 449}));
}

TEST(Reply, SplitReasoningAndContent) {
  ReplyParts p = split_reasoning(
      "Let me think.<|close|>think<|sep|><|open|>response<|sep|>The answer is 4."
      "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>");
  EXPECT_EQ(p.reasoning, "Let me think.");
  EXPECT_EQ(p.content, "The answer is 4.");
  EXPECT_TRUE(p.reasoning_done);
  EXPECT_TRUE(p.tool_calls.empty());
  // Cut short while thinking: all reasoning.
  p = split_reasoning("still thinking<|close|>thi");
  EXPECT_EQ(p.reasoning, "still thinking<|close|>thi");
  EXPECT_EQ(p.content, "");
  EXPECT_FALSE(p.reasoning_done);
  // Thinking off: the reply is the response channel.
  p = split_reasoning("Hi there<|close|>response<|sep|><|close|>message<|sep|>", false);
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Hi there");
  // Hidden specials (no markers at all) leave everything in the first channel.
  EXPECT_EQ(split_reasoning("plain", false).content, "plain");
}

TEST(Reply, ToolCallsRoundTripThroughTheRenderer) {
  json msgs = json::parse(R"([{"role": "assistant", "content": "ok", "tool_calls": [
      {"id": "c1", "function": {"name": "get_weather",
       "arguments": "{\"city\": \"Paris \\\"Nord\\\"\", \"days\": 2, \"metric\": true, \"tags\": [\"a\"], \"o\": {\"x\": 1.5}}"}},
      {"id": "c2", "function": {"name": "raw", "arguments": "{broken"}}]}])");
  ChatOptions o;
  o.add_generation_prompt = false;
  o.reasoning_effort = "";
  std::string rendered = render_chat_text(msgs, o);
  // What the model would generate after <think>: drop the prompt part.
  std::string reply = "plan<|close|>think<|sep|>" + rendered.substr(rendered.find("<|open|>response<|sep|>"));
  ReplyParts p = split_reasoning(reply);
  EXPECT_EQ(p.reasoning, "plan");
  EXPECT_EQ(p.content, "ok");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"],
            R"({"city":"Paris \"Nord\"","days":2,"metric":true,"tags":["a"],"o":{"x":1.5}})");
  EXPECT_EQ(p.tool_calls[0]["id"], "call_1");
  EXPECT_EQ(p.tool_calls[0]["type"], "function");
  EXPECT_EQ(p.tool_calls[1]["function"]["name"], "raw");
  EXPECT_EQ(p.tool_calls[1]["function"]["arguments"], "{broken");
}

TEST(Reply, StreamingGivesTheSameSplitAtAnyChunking) {
  std::string reply =
      "a<b|c<|close|>thin<|close|>think<|sep|><|open|>response<|sep|>answer <|x <|close|>response<|sep|>"
      "<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
      "<|close|>message<|sep|><|end_of_msg|>";
  ReplyParts whole = split_reasoning(reply);
  EXPECT_EQ(whole.reasoning, "a<b|c<|close|>thin");
  EXPECT_EQ(whole.content, "answer <|x ");
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  for (size_t chunk : {1u, 2u, 3u, 7u, 13u}) {
    ReplyStream rs;
    std::string reasoning, content;
    for (size_t i = 0; i < reply.size(); i += chunk) {
      auto d = rs.push(std::string_view(reply).substr(i, chunk));
      reasoning += d.reasoning, content += d.content;
      // Nothing of a marker ever leaks into a channel.
      EXPECT_EQ(content.find("<|close|>"), std::string::npos);
    }
    auto d = rs.finish();
    reasoning += d.reasoning, content += d.content;
    EXPECT_EQ(reasoning, whole.reasoning) << chunk;
    EXPECT_EQ(content, whole.content) << chunk;
    EXPECT_EQ(rs.parts().tool_calls, whole.tool_calls);
  }
}

// A model can write any bytes: invalid UTF-8 in a tool call becomes U+FFFD
// and the calls serialize (this threw json type_error 316 before).
TEST(ToolCalls, InvalidUtf8BecomesReplacementCharacter) {
  const std::string reply =
      "<|open|>tools<|sep|><|open|>call tool=\"f\xfe\" index=\"1\"<|sep|><|open|>argument key=\"a\xc3\" "
      "type=\"string\"<|sep|>\xff<|close|>argument<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>"
      "\"x\xff\"<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>";
  nlohmann::json calls;
  ASSERT_NO_THROW(calls = parse_tool_calls(reply));
  ASSERT_EQ(calls.size(), 1u);
  std::string dumped;
  ASSERT_NO_THROW(dumped = calls.dump());
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(calls[0]["function"]["name"], "f" + fffd);
  const nlohmann::json args = nlohmann::json::parse(calls[0]["function"]["arguments"].get<std::string>());
  EXPECT_EQ(args["a" + fffd], fffd);
  EXPECT_EQ(args["n"], "\"x" + fffd + "\"");
  // A nesting bomb as an argument value stays text.
  const std::string bomb = std::string(100000, '[');
  const nlohmann::json deep = parse_tool_calls("<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|open|>argument key=\"a\" "
                                               "type=\"object\"<|sep|>" + bomb + "<|close|>argument<|sep|>");
  ASSERT_EQ(deep.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(deep[0]["function"]["arguments"].get<std::string>())["a"], bomb);
}

// Tokenizing stops at a cap: a huge message makes a little more than max_tokens
// ids (the prompt is known to be too long), not millions; below the cap it is
// the same prompt.
TEST(Chat, RenderStopsAtTheCap) {
  const Tokenizer& t = tiny();
  json small = json::array({{{"role", "user"}, {"content", "Hello there"}}});
  std::vector<int> whole = render_chat(t, small);
  EXPECT_EQ(render_chat(t, small, {}, whole.size()), whole);
  std::string words;
  for (int i = 0; i < 200000; i++) words += "word" + std::to_string(i % 97) + " ";
  json big = json::array({{{"role", "user"}, {"content", words}}});
  std::vector<int> capped = render_chat(t, big, {}, 1000);
  EXPECT_GT(capped.size(), 1000u);
  EXPECT_LT(capped.size(), 1100u);
  std::vector<int> ids;
  EXPECT_FALSE(t.encode_into(words, false, ids, 50));
  EXPECT_GT(ids.size(), 50u);
  EXPECT_LT(ids.size(), 60u);
  ids.clear();
  EXPECT_TRUE(t.encode_into("Hello there", false, ids, 50));
  EXPECT_EQ(ids, t.encode("Hello there"));
}

}  // namespace
}  // namespace sluice::text
