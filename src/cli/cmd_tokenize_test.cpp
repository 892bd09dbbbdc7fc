// Runs `sluice tokenize` / `sluice detokenize` as a user would.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

const std::string kModel = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

struct Result {
  int status;
  std::string out;
};

// Single-quotes an argument for /bin/sh.
std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result run(const std::string& args) {
  std::string cmd = std::string(SLUICE_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string join(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); i++) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

TEST(CliTokenize, FixtureCases) {
  std::ifstream f(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/tokenizer_cases.json");
  ASSERT_TRUE(f);
  nlohmann::json cases = nlohmann::json::parse(f)["cases"];
  for (auto& c : cases) {
    std::string text = c["text"];
    bool special = c["parse_special"];
    std::vector<int> ids = c["tokens"];
    Result r = run("tokenize --model " + q(kModel) + " --text " + q(text) + (special ? " --special" : ""));
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(r.out, join(ids) + "\n") << text;
    Result d = run("detokenize --model " + q(kModel) + " --ids " + q(join(ids)));
    EXPECT_EQ(d.status, 0) << d.out;
    EXPECT_EQ(d.out, text + "\n");
  }
}

TEST(CliTokenize, HiddenSpecialsAndErrors) {
  Result d = run("detokenize --model " + q(kModel) + " --ids '39 450 68' --hide-special");
  EXPECT_EQ(d.out, "He\n");
  Result bad = run("detokenize --model " + q(kModel) + " --ids '39 99999'");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("99999"), std::string::npos) << bad.out;
  Result missing = run("tokenize --model /nonexistent/model --text hi");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.out.find("/nonexistent/model/tiktoken.model"), std::string::npos) << missing.out;
  Result garbage = run("detokenize --model " + q(kModel) + " --ids '1 x'");
  EXPECT_NE(garbage.status, 0);
  EXPECT_EQ(run("tokenize --model " + q(kModel) + " --text ''").out, "\n");
}

}  // namespace
