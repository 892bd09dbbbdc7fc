// Lenient vendor fields, bounded fields and the Responses API's request (serve/request.h).
#include "serve/request.h"

#include <gtest/gtest.h>

#include "serve/response.h"
#include "text/chat.h"

#include <cstdio>
#include <limits>

namespace sluice::serve {
namespace {

Limits limits(bool lenient) {
  Limits l{"m", 100, 512, 1000, false, {}};
  l.lenient = lenient;
  return l;
}

json chat(json extra = json::object()) {
  json b = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  b.update(extra);
  return b;
}

template <class F>
ApiError error_of(F f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted";
  return {};
}

TEST(Request, VendorFieldsLenientAndStrict) {
  json vendor = {{"min_p", 0.1}, {"repetition_penalty", 1.1}, {"typical_p", 0.9}};
  GenerationRequest r = parse_chat_request(chat(vendor), limits(true));
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"min_p", "repetition_penalty", "typical_p"}));
  for (auto& [k, v] : vendor.items()) {
    ApiError e = error_of([&] { parse_chat_request(chat({{k, v}}), limits(false)); });
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, k);
    EXPECT_EQ(e.code, "unknown_parameter");
  }
  // Unknown fields that are nobody's stay refused in lenient mode.
  EXPECT_EQ(error_of([&] { parse_chat_request(chat({{"frobnicate", 1}}), limits(true)); }).code, "unknown_parameter");
  // Completions too.
  json c = {{"model", "m"}, {"prompt", "x"}, {"min_p", 0.2}};
  EXPECT_EQ(parse_completion_request(c, limits(true)).ignored.size(), 1u);
  EXPECT_EQ(error_of([&] { parse_completion_request(c, limits(false)); }).param, "min_p");
}

TEST(Request, ReasoningEffortMinimal) {
  GenerationRequest r = parse_chat_request(chat({{"reasoning_effort", "minimal"}}), limits(true));
  EXPECT_EQ(r.reasoning_effort, "low");
  EXPECT_TRUE(r.thinking);
  EXPECT_EQ(r.ignored.size(), 1u);
  EXPECT_EQ(error_of([&] { parse_chat_request(chat({{"reasoning_effort", "minimal"}}), limits(false)); }).param,
            "reasoning_effort");
}

TEST(Request, MediumIsTakenAsHigh) {
  for (bool lenient : {true, false}) {
    GenerationRequest r = parse_chat_request(chat({{"reasoning_effort", "medium"}}), limits(lenient));
    EXPECT_TRUE(r.thinking);
    EXPECT_EQ(r.reasoning_effort, "high");
  }
  json b = {{"model", "m"}, {"input", "x"}, {"reasoning", {{"effort", "medium"}}}};
  EXPECT_EQ(parse_responses_request(b, limits(true)).reasoning_effort, "high");
}

// nanoK3's generation_config.json: no thinking, sampling at 0.8 / 0.9.
Limits nano_limits(bool lenient) {
  Limits l = limits(lenient);
  l.defaults.reasoning_effort = "none";
  l.defaults.temperature = 0.8f;
  l.defaults.top_p = 0.9f;
  l.defaults.max_new_tokens = 50;
  return l;
}

TEST(Request, TheModelsDefaultsUnlessTheRequestSays) {
  GenerationRequest r = parse_chat_request(chat(), nano_limits(true));
  EXPECT_FALSE(r.thinking);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.max_tokens, 0);  // the server applies defaults.max_new_tokens (generation.cpp)

  r = parse_chat_request(chat({{"temperature", 0}, {"top_p", 1}, {"reasoning_effort", "low"}}), nano_limits(true));
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_TRUE(r.thinking);
  EXPECT_EQ(r.reasoning_effort, "low");

  json c = {{"model", "m"}, {"prompt", "x"}};
  EXPECT_FLOAT_EQ(parse_completion_request(c, nano_limits(true)).sampling.temperature, 0.8f);
  json b = {{"model", "m"}, {"input", "x"}};
  EXPECT_FALSE(parse_responses_request(b, nano_limits(true)).thinking);
  b["reasoning"] = {{"effort", "high"}};
  EXPECT_TRUE(parse_responses_request(b, nano_limits(true)).thinking);
}

TEST(Request, ThinkingSwitches) {
  struct Case {
    json extra;
    bool thinking;
  };
  const std::vector<Case> cases = {
      {{{"chat_template_kwargs", {{"thinking", false}}}}, false},
      {{{"chat_template_kwargs", {{"enable_thinking", false}}}}, false},
      {{{"enable_thinking", false}}, false},
      {{{"thinking", {{"type", "disabled"}}}}, false},
      {{{"thinking", false}}, false},
      {{{"chat_template_kwargs", {{"thinking", false}, {"enable_thinking", false}}}}, false},
      {{{"chat_template_kwargs", {{"thinking", true}}}}, true},
      {{{"thinking", {{"type", "enabled"}}}, {"reasoning_effort", "high"}}, true},
      {{{"chat_template_kwargs", {{"thinking", nullptr}}}}, true},
  };
  for (bool strict : {false, true})
    for (const Case& c : cases) {
      GenerationRequest r = parse_chat_request(chat(c.extra), limits(!strict));
      EXPECT_EQ(r.thinking, c.thinking) << c.extra.dump();
    }
  // Turned on over a model whose default is no thinking: K3's default effort.
  GenerationRequest on = parse_chat_request(chat({{"enable_thinking", true}}), nano_limits(true));
  EXPECT_TRUE(on.thinking);
  EXPECT_EQ(on.reasoning_effort, "max");
  EXPECT_FALSE(parse_chat_request(chat({{"chat_template_kwargs", json::object()}}), nano_limits(true)).thinking);

  struct Bad {
    json extra;
    std::string param;
  };
  const std::vector<Bad> bad = {
      {{{"chat_template_kwargs", {{"thinking", false}}}, {"reasoning_effort", "high"}}, "reasoning_effort"},
      {{{"enable_thinking", true}, {"reasoning_effort", "none"}}, "reasoning_effort"},
      {{{"chat_template_kwargs", {{"thinking", true}}}, {"enable_thinking", false}}, "enable_thinking"},
      {{{"chat_template_kwargs", {{"thinking", "no"}}}}, "chat_template_kwargs.thinking"},
      {{{"chat_template_kwargs", 1}}, "chat_template_kwargs"},
      {{{"thinking", {{"type", "off"}}}}, "thinking.type"},
      {{{"thinking", "off"}}, "thinking"},
  };
  for (const Bad& b : bad)
    EXPECT_EQ(error_of([&] { parse_chat_request(chat(b.extra), limits(true)); }).param, b.param) << b.extra.dump();

  // Other template variables: ignored with a note when lenient, refused when strict.
  json other = {{"chat_template_kwargs", {{"enable_thinking", false}, {"tools_in_user_message", true}}}};
  GenerationRequest r = parse_chat_request(chat(other), limits(true));
  EXPECT_FALSE(r.thinking);
  EXPECT_EQ(r.ignored, std::vector<std::string>{"chat_template_kwargs.tools_in_user_message"});
  EXPECT_EQ(error_of([&] { parse_chat_request(chat(other), limits(false)); }).param,
            "chat_template_kwargs.tools_in_user_message");
}

TEST(Request, ModelMayBeLeftOutWhenLenient) {
  json b = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 30}};
  EXPECT_EQ(parse_chat_request(b, limits(true)).model, "m");
  EXPECT_EQ(error_of([&] { parse_chat_request(b, limits(false)); }).param, "model");
}

// A reply as the server sends it (reasoning_content, tool_calls, content null) goes
// back in the next request and is rendered as K3's template expects (spec §6.3).
TEST(Request, ReasoningAndToolCallsComeBack) {
  ReplyBody b;
  b.reasoning = "I should look it up.";
  b.has_reasoning = true;
  b.tool_calls = json::array({{{"id", "call_1"},
                               {"type", "function"},
                               {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}}});
  b.finish_reason = "tool_calls";
  json sent = chat_completion_json(ReplyHeader{"chatcmpl-1", 0, "m", "fp"}, b);
  json assistant = sent["choices"][0]["message"];
  ASSERT_TRUE(assistant["content"].is_null());
  json tools = json::array({{{"type", "function"},
                             {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});
  json body = {{"model", "m"},
               {"tools", tools},
               {"messages",
                {{{"role", "user"}, {"content", "Weather in Paris?"}},
                 assistant,
                 {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18C"}}}}};
  GenerationRequest r = parse_chat_request(body, limits(false));
  text::ChatOptions co;
  co.tools = r.tools;
  const std::string prompt = text::render_chat_text(r.messages, co);
  const std::string want =
      "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>I should look it up.<|close|>think<|sep|>"
      "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
      "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
      "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"tool\" tool=\"get_weather\" index=\"1\"<|sep|>18C<|close|>message<|sep|>";
  EXPECT_NE(prompt.find(want), std::string::npos) << prompt;
}

TEST(Request, BoundedFields) {
  auto tool = [](const std::string& name) {
    return json{{"type", "function"}, {"function", {{"name", name}, {"parameters", json::object()}}}};
  };
  EXPECT_NO_THROW(parse_chat_request(chat({{"tools", {tool(std::string(64, 'a'))}}}), limits(true)));
  for (const std::string& bad : {std::string(65, 'a'), std::string(100000, 'a'), std::string("a b"), std::string("")})
    EXPECT_EQ(error_of([&] { parse_chat_request(chat({{"tools", {tool(bad)}}}), limits(true)); }).param,
              "tools[0].function.name");
  json many = json::array();
  for (size_t i = 0; i <= kMaxTools; i++) {
    char name[16];
    std::snprintf(name, sizeof name, "t%zu", i);
    many.push_back(tool(name));
  }
  EXPECT_EQ(error_of([&] { parse_chat_request(chat({{"tools", many}}), limits(true)); }).param, "tools");
  EXPECT_EQ(error_of([&] { parse_chat_request(chat({{"stop", std::string(kMaxStopLength + 1, 'x')}}), limits(true)); })
                .param,
            "stop");
}

// Integer fields are range-checked exactly: floats past int64 (9.3e18, 2^63) and
// integers past a field's range are 400s, never cast.
TEST(Request, IntegerFieldsRangeChecked) {
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(parse_chat_request(chat({{"seed", max64}}), limits(true)).sampling.seed, uint64_t(max64));
  EXPECT_EQ(parse_chat_request(chat({{"seed", -1}}), limits(true)).sampling.seed, ~0ull);
  EXPECT_EQ(parse_chat_request(chat({{"seed", 1e18}}), limits(true)).sampling.seed, uint64_t(1000000000000000000));
  for (json bad : {json(9.3e18), json(9223372036854775808.0), json(-9.3e18), json(uint64_t(max64) + 1),
                   json(~0ull), json(1e300)}) {
    ApiError e = error_of([&] { parse_chat_request(chat({{"seed", bad}}), limits(true)); });
    EXPECT_EQ(e.status, 400) << bad.dump();
    EXPECT_EQ(e.param, "seed") << bad.dump();
  }
  for (const char* k : {"max_tokens", "max_completion_tokens", "n", "top_k"})
    for (json bad : {json(9.22e18), json(-9.22e18), json(uint64_t(1) << 40)})
      EXPECT_EQ(error_of([&] { parse_chat_request(chat({{k, bad}}), limits(true)); }).param, k) << k << bad.dump();
  EXPECT_EQ(error_of([&] { parse_completion_request({{"model", "m"}, {"prompt", {1, 9.3e18}}}, limits(true)); }).param,
            "prompt[1]");
}

TEST(Request, Responses) {
  json b = {{"model", "m"},
            {"input", "Hello"},
            {"instructions", "Be brief."},
            {"max_output_tokens", 7},
            {"reasoning", {{"effort", "none"}}},
            {"stream", true},
            {"store", false}};
  GenerationRequest r = parse_responses_request(b, limits(true));
  EXPECT_EQ(r.api, Api::responses);
  EXPECT_EQ(r.endpoint, Endpoint::chat);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FALSE(r.thinking);
  EXPECT_TRUE(r.stream);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "Hello");

  json part_a = {{"type", "input_text"}, {"text", "a"}}, part_b = {{"type", "input_text"}, {"text", "b"}};
  json msg = {{"role", "user"}, {"content", json::array({part_a, part_b})}};
  json parts = {{"model", "m"}, {"input", json::array({msg})}};
  EXPECT_EQ(parse_responses_request(parts, limits(true)).messages[0]["content"], "ab");

  EXPECT_EQ(error_of([&] { parse_responses_request({{"model", "m"}}, limits(true)); }).param, "input");
  EXPECT_EQ(error_of([&] { parse_responses_request({{"model", "m"}, {"input", 5}}, limits(true)); }).param, "input");
  EXPECT_EQ(error_of([&] { parse_responses_request({{"model", "m"}, {"input", "x"}, {"max_output_tokens", 1000}},
                                                   limits(true)); })
                .param,
            "max_output_tokens");
  EXPECT_EQ(error_of([&] { parse_responses_request({{"model", "m"}, {"input", "x"}, {"previous_response_id", "r"}},
                                                   limits(true)); })
                .code,
            "unknown_parameter");
  json img_part = {{"type", "input_image"}, {"image_url", "x"}};
  json img_msg = {{"role", "user"}, {"content", json::array({img_part})}};
  json image = {{"model", "m"}, {"input", json::array({img_msg})}};
  EXPECT_EQ(error_of([&] { parse_responses_request(image, limits(true)); }).code, "unsupported_parameter");
}

}  // namespace
}  // namespace sluice::serve
