// Lenient vendor fields, bounded fields and the Responses API's request (serve/request.h).
#include "serve/request.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <limits>

namespace sluice::serve {
namespace {

Limits limits(bool lenient) {
  Limits l{"m", 100, 512, 1000};
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
  json vendor = {{"min_p", 0.1}, {"repetition_penalty", 1.1}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
  GenerationRequest r = parse_chat_request(chat(vendor), limits(true));
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"chat_template_kwargs", "min_p", "repetition_penalty"}));
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
