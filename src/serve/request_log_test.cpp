#include "serve/request_log.h"

#include <cctype>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sluice::serve {
namespace {

// "2026-12-05T08:50:00.123Z": digits where the shape has 9, the rest as written.
// (By hand: std::regex here trips GCC 12's -Wmaybe-uninitialized under the sanitizers.)
bool is_log_time(const std::string& t) {
  const std::string shape = "9999-99-99T99:99:99.999Z";
  if (t.size() != shape.size()) return false;
  for (size_t i = 0; i < t.size(); i++)
    if (shape[i] == '9' ? !std::isdigit(static_cast<unsigned char>(t[i])) : t[i] != shape[i]) return false;
  return true;
}

TEST(RequestLog, OneLineTextAndJson) {
  RequestLog r;
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.status = 200;
  r.id = "chatcmpl-1";
  r.prompt_tokens = 12;
  r.cached_tokens = 4;
  r.completion_tokens = 3;
  r.queue_wait = 0.5;
  r.ttft = 1.25;
  r.tokens_per_second = 2;
  r.bytes_read = 4096;
  r.cache_hit_rate = 0.75;
  r.warnings = {"ignored:min_p"};
  EXPECT_EQ(r.text(),
            "sluice serve: POST /v1/chat/completions 200 ok id=chatcmpl-1 prompt=12 cached=4 completion=3 "
            "queue_s=0.500 ttft_s=1.250 tok_s=2.00 bytes_read=4096 hit_rate=0.750 warning=ignored:min_p");
  auto j = nlohmann::json::parse(r.json_line());
  EXPECT_EQ(j["event"], "request");
  EXPECT_EQ(j["outcome"], "ok");
  EXPECT_EQ(j["prompt_tokens"], 12);
  EXPECT_EQ(j["cache_hit_rate"], 0.75);
  EXPECT_FALSE(j.contains("stream"));
}

TEST(RequestLog, OutcomeFromStatusAndNoControlCharacters) {
  RequestLog r;
  r.method = "GET";
  r.path = "/x\n\x1b[31mred";
  r.status = 429;
  EXPECT_EQ(r.text(), "sluice serve: GET /x\\x0a\\x1b[31mred 429 busy");
  r.status = 404;
  EXPECT_NE(r.text().find(" 404 refused"), std::string::npos);
  r.status = 500;
  EXPECT_NE(r.text().find(" 500 failed"), std::string::npos);
  r.status = 200;
  r.outcome = "cancelled";
  EXPECT_NE(r.text().find(" 200 cancelled"), std::string::npos);
  EXPECT_EQ(r.json_line().find('\n'), std::string::npos);
}

// Readable text logs (spaces are not \x20) and a timestamp on every line, both formats.
TEST(RequestLog, ReadableValuesAndTimestamps) {
  RequestLog r;
  r.method = "POST";
  r.path = "/v1/completions";
  r.status = 400;
  r.error = "The prompt is \"long\" a=b";
  r.warnings = {"ignored:min_p"};
  EXPECT_EQ(r.text(),
            "sluice serve: POST /v1/completions 400 refused error=\"The prompt is \\\"long\\\" a=b\" "
            "warning=ignored:min_p");
  EXPECT_EQ(r.text().find("\\x20"), std::string::npos);
  r.time = log_time();
  ASSERT_EQ(r.time.size(), 24u);  // 2026-12-05T08:50:00.123Z
  EXPECT_TRUE(is_log_time(r.time)) << r.time;
  EXPECT_EQ(r.text().rfind(r.time + " sluice serve: POST ", 0), 0u) << r.text();
  EXPECT_EQ(nlohmann::json::parse(r.json_line())["time"], r.time);
  const std::string text = message_line("listening", false);
  EXPECT_TRUE(is_log_time(text.substr(0, 24))) << text;
  EXPECT_EQ(text.substr(24), " sluice serve: listening") << text;
  auto j = nlohmann::json::parse(message_line("listening", true));
  EXPECT_EQ(j["event"], "message");
  EXPECT_EQ(j["message"], "listening");
  EXPECT_EQ(j["time"].get<std::string>().size(), 24u);
}

}  // namespace
}  // namespace sluice::serve
