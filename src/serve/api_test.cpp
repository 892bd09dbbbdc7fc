// Request checking and reply shapes of the OpenAI wire format.
#include "serve/request.h"
#include "serve/response.h"

#include <gtest/gtest.h>

namespace sluice::serve {
namespace {

Limits limits() { return Limits{"m", 100, 512, 1000, false, {}}; }

json chat(json extra = json::object()) {
  json b = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  b.update(extra);
  return b;
}

ApiError chat_error(const json& body) {
  try {
    parse_chat_request(body, limits());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

ApiError completion_error(const json& body) {
  try {
    parse_completion_request(body, limits());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

TEST(Api, ChatDefaultsAndFields) {
  GenerationRequest r = parse_chat_request(chat(), limits());
  EXPECT_EQ(r.endpoint, Endpoint::chat);
  EXPECT_EQ(r.max_tokens, 0);  // the server picks
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_TRUE(r.thinking);
  EXPECT_EQ(r.reasoning_effort, "max");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.seed_given);

  r = parse_chat_request(chat({{"max_completion_tokens", 7}, {"temperature", 0}, {"top_p", 0.5}, {"top_k", 3},
                               {"seed", -1}, {"stop", "END"}, {"stream", true},
                               {"stream_options", {{"include_usage", true}}}, {"logprobs", true},
                               {"top_logprobs", 2}, {"reasoning_effort", "none"}, {"user", "u"}, {"n", 1},
                               {"presence_penalty", 0}, {"logit_bias", json::object()}}),
                         limits());
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_EQ(r.sampling.seed, ~0ull);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_FALSE(r.thinking);

  r = parse_chat_request(chat({{"top_p", 0}}), limits());
  EXPECT_EQ(r.sampling.top_k, 1);  // top_p 0 keeps only the most probable token
}

TEST(Api, ChatRefusals) {
  struct Case {
    json extra;
    int status;
    std::string param, code;
  };
  std::vector<Case> cases = {
      {{{"n", 2}}, 400, "n", "unsupported_parameter"},
      {{{"model", "other"}}, 404, "model", "model_not_found"},
      {{{"messages", json::array()}}, 400, "messages", "empty_array"},
      {{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, 400, "messages[0].role", "invalid_value"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}},
       400, "messages[0].content[0].type", "unsupported_content"},
      {{{"messages", {{{"role", "user"}, {"content", "x"}, {"extra", 1}}}}}, 400, "messages[0].extra",
       "unknown_parameter"},
      {{{"messages", {{{"role", "assistant"}}}}}, 400, "messages[0].content", "missing_required_parameter"},
      {{{"temperature", "1"}}, 400, "temperature", "invalid_type"},
      {{{"temperature", 2.5}}, 400, "temperature", "invalid_value"},
      {{{"max_tokens", 101}}, 400, "max_tokens", "invalid_value"},
      {{{"max_tokens", 0}}, 400, "max_tokens", "invalid_value"},
      {{{"max_tokens", 5}, {"max_completion_tokens", 6}}, 400, "max_completion_tokens", "invalid_value"},
      {{{"top_logprobs", 3}}, 400, "top_logprobs", "invalid_value"},
      {{{"logprobs", true}, {"top_logprobs", 21}}, 400, "top_logprobs", "invalid_value"},
      {{{"stream_options", {{"include_usage", true}}}}, 400, "stream_options", "invalid_value"},
      {{{"stop", {"a", "b", "c", "d", "e"}}}, 400, "stop", "invalid_value"},
      {{{"stop", {""}}}, 400, "stop", "invalid_value"},
      {{{"frequency_penalty", 1}}, 400, "frequency_penalty", "unsupported_parameter"},
      {{{"logit_bias", {{"5", 1}}}}, 400, "logit_bias", "unsupported_parameter"},
      {{{"reasoning_effort", "minimal"}}, 400, "reasoning_effort", "invalid_value"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"strict", true}}}}}}, 400,
       "response_format.json_schema.strict", "unsupported_parameter"},
      {{{"tool_choice", {{"type", "function"}}}}, 400, "tool_choice", "unsupported_parameter"},
      {{{"audio", {{"voice", "x"}}}}, 400, "audio", "unsupported_parameter"},
      {{{"whatever", 1}}, 400, "whatever", "unknown_parameter"},
  };
  for (const Case& c : cases) {
    ApiError e = chat_error(chat(c.extra));
    EXPECT_EQ(e.status, c.status) << c.extra.dump();
    EXPECT_EQ(e.param, c.param) << c.extra.dump();
    EXPECT_EQ(e.code, c.code) << c.extra.dump() << " " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
  EXPECT_EQ(chat_error(json::array()).status, 400);
  EXPECT_EQ(chat_error({{"messages", json::array()}}).param, "model");
}

TEST(Api, CompletionPrompts) {
  json b = {{"model", "m"}, {"prompt", {1, 2, 3}}};
  GenerationRequest r = parse_completion_request(b, limits());
  EXPECT_EQ(r.prompt_ids, (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(r.prompt_is_text);
  b["prompt"] = {{4, 5}};
  EXPECT_EQ(parse_completion_request(b, limits()).prompt_ids, (std::vector<int>{4, 5}));
  b["prompt"] = "text";
  r = parse_completion_request(b, limits());
  EXPECT_TRUE(r.prompt_is_text);
  EXPECT_EQ(r.prompt_text, "text");
  b["prompt"] = {"one"};
  EXPECT_EQ(parse_completion_request(b, limits()).prompt_text, "one");
  b["logprobs"] = 3;
  r = parse_completion_request(b, limits());
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);

  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", {1, 512}}}).param, "prompt[1]");
  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", {"a", "b"}}}).code, "unsupported_parameter");
  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", ""}}).param, "prompt");
  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", json::array()}}).param, "prompt");
  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", 5}}).code, "invalid_type");
  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", "x"}, {"echo", true}}).param, "echo");
  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", "x"}, {"logprobs", 6}}).param, "logprobs");
  EXPECT_EQ(completion_error({{"model", "m"}, {"prompt", "x"}, {"messages", json::array()}}).code,
            "unknown_parameter");
}

TEST(Api, JsonDepthLimit) {
  EXPECT_NO_THROW(check_json_depth(R"({"a":[{"b":"[[[[[[[[[["}]})", 3));
  EXPECT_THROW(check_json_depth("[[[[]]]]", 3), ApiError);
  EXPECT_NO_THROW(check_json_depth(R"(["\"[[[["])", 1));
}

TEST(Api, ReplyShapes) {
  ReplyHeader h{"chatcmpl-1", 1700000000, "m", "fp"};
  ReplyBody b;
  b.content = "hi";
  b.reasoning = "think";
  b.has_reasoning = true;
  b.usage = {10, 3, 4, 2};
  b.finish_reason = "length";
  json j = chat_completion_json(h, b);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "think");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens_details"]["reasoning_tokens"], 2);
  b.tool_calls = json::array({{{"id", "call_1"}}});
  b.content.clear();
  j = chat_completion_json(h, b);
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u);

  json c = chat_chunk_json(h, {{"content", "x"}}, nullptr, nullptr, true);
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
  EXPECT_FALSE(chat_chunk_json(h, json::object(), nullptr, "stop", false).contains("usage"));
  json u = usage_chunk_json(h, Endpoint::completions, {1, 2, 0, 0});
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_FALSE(u["usage"].contains("completion_tokens_details"));

  std::vector<TokenInfo> toks = {{"ab", -0.5f, {{"ab", -0.5f}, {"c", -1.5f}}}, {"\xe2\x82", -0.1f, {}}};
  json lp = completion_logprobs_json(toks, 3);
  EXPECT_EQ(lp["text_offset"], json({3, 5}));
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  json clp = chat_logprobs_json(toks);
  EXPECT_EQ(clp["content"][1]["bytes"], json({0xe2, 0x82}));
  EXPECT_NO_THROW(dump(clp));  // the broken UTF-8 becomes U+FFFD, no exception

  json err = error_body({429, "busy", "rate_limit_error", "", "server_busy"});
  EXPECT_TRUE(err["error"]["param"].is_null());
  EXPECT_EQ(err["error"]["code"], "server_busy");
}

}  // namespace
}  // namespace sluice::serve
