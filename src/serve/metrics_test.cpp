#include "serve/metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace sluice::serve {
namespace {

// Every line is a comment (# HELP/# TYPE) or `name{labels} value`, and each
// family's HELP and TYPE come before its samples.
void expect_valid_text(const std::string& text) {
  static const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? [-+0-9.eEInfa]+$)");
  static const std::regex help(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    if (line.rfind("#", 0) == 0)
      EXPECT_TRUE(std::regex_match(line, help)) << line;
    else
      EXPECT_TRUE(std::regex_match(line, sample)) << line;
  }
  EXPECT_GT(n, 0);
}

TEST(Metrics, CountersGaugesAndHistograms) {
  Metrics m;
  m.counter("x_requests_total", "Requests.");
  m.gauge("x_queue_depth", "Waiting requests.");
  m.histogram("x_ttft_seconds", "Time to first token.", {0.1, 1, 10});
  std::string empty = m.render();
  expect_valid_text(empty);
  EXPECT_NE(empty.find("x_requests_total 0\n"), std::string::npos);
  EXPECT_NE(empty.find("x_ttft_seconds_bucket{le=\"+Inf\"} 0\n"), std::string::npos);

  m.add("x_requests_total", 1, {{"route", "/v1/chat/completions"}, {"status", "200"}});
  m.add("x_requests_total", 2, {{"route", "/v1/chat/completions"}, {"status", "200"}});
  m.set("x_queue_depth", 3);
  m.observe("x_ttft_seconds", 0.05);
  m.observe("x_ttft_seconds", 0.5);
  m.observe("x_ttft_seconds", 50);
  std::string t = m.render();
  expect_valid_text(t);
  EXPECT_NE(t.find("# TYPE x_requests_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("x_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 3\n"), std::string::npos);
  EXPECT_NE(t.find("x_queue_depth 3\n"), std::string::npos);
  EXPECT_NE(t.find("x_ttft_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("x_ttft_seconds_bucket{le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("x_ttft_seconds_bucket{le=\"10\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("x_ttft_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(t.find("x_ttft_seconds_count 3\n"), std::string::npos);
  EXPECT_NE(t.find("x_ttft_seconds_sum 50.55\n"), std::string::npos);
}

TEST(Metrics, LabelValuesAreEscaped) {
  Metrics m;
  m.counter("y_total", "Y.");
  m.add("y_total", 1, {{"path", "a\"b\\c\nd"}});
  std::string t = m.render();
  EXPECT_NE(t.find("y_total{path=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << t;
  expect_valid_text(t);
  EXPECT_THROW(m.add("nope", 1), std::exception);
}

}  // namespace
}  // namespace sluice::serve
