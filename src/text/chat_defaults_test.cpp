// generation_config.json's defaults and the effort spellings (text/chat_defaults.h).
#include "text/chat_defaults.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace sluice::text {
namespace {

namespace fs = std::filesystem;

// A model directory holding only generation_config.json with `text` (none when empty).
struct ModelDir {
  fs::path dir = fs::path(::testing::TempDir()) / ("chat-defaults-" + std::to_string(::getpid()));
  explicit ModelDir(const std::string& text) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    if (!text.empty()) std::ofstream(dir / "generation_config.json") << text;
  }
  ~ModelDir() { fs::remove_all(dir); }
  ChatDefaults read() const { return chat_defaults(dir.string()); }
};

TEST(ChatDefaults, WithoutTheFileOpenAIsSamplingAndK3sEffort) {
  ChatDefaults d = ModelDir("").read();
  EXPECT_EQ(d.reasoning_effort, "max");
  EXPECT_EQ(d.max_new_tokens, 0);
  EXPECT_EQ(d.temperature, 1.0f);
  EXPECT_EQ(d.top_p, 1.0f);
}

TEST(ChatDefaults, TheFilesKeys) {
  ChatDefaults d =
      ModelDir(R"({"max_new_tokens": 256, "temperature": 0.8, "top_p": 0.9, "reasoning_effort": "none"})").read();
  EXPECT_EQ(d.reasoning_effort, "none");
  EXPECT_EQ(d.max_new_tokens, 256);
  EXPECT_FLOAT_EQ(d.temperature, 0.8f);
  EXPECT_FLOAT_EQ(d.top_p, 0.9f);

  // K3's published shape: sampling only, plus keys sluice does not use.
  d = ModelDir(R"({"do_sample": true, "temperature": 1.0, "top_p": 0.95, "eos_token_id": 163586})").read();
  EXPECT_EQ(d.reasoning_effort, "max");
  EXPECT_EQ(d.temperature, 1.0f);
  EXPECT_FLOAT_EQ(d.top_p, 0.95f);

  // do_sample false: greedy, whatever the temperature says.
  EXPECT_EQ(ModelDir(R"({"do_sample": false, "temperature": 0.7})").read().temperature, 0.0f);
  EXPECT_EQ(ModelDir(R"({"reasoning_effort": "medium"})").read().reasoning_effort, "high");
}

TEST(ChatDefaults, BadValuesNameTheFile) {
  for (const char* bad : {"[1]", "{", R"({"reasoning_effort": "huge"})", R"({"reasoning_effort": 3})",
                          R"({"max_new_tokens": 0})", R"({"temperature": -1})", R"({"temperature": 3})",
                          R"({"top_p": 0})", R"({"top_p": 1.5})", R"({"do_sample": "yes"})"}) {
    ModelDir m(bad);
    try {
      m.read();
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
    }
  }
}

TEST(ChatDefaults, ThinkingEffort) {
  EXPECT_EQ(thinking_effort("none"), "none");
  EXPECT_EQ(thinking_effort("low"), "low");
  EXPECT_EQ(thinking_effort("medium"), "high");
  EXPECT_EQ(thinking_effort("high"), "high");
  EXPECT_EQ(thinking_effort("max"), "max");
  EXPECT_EQ(thinking_effort("minimal"), "");
  EXPECT_EQ(thinking_effort("MAX"), "");
}

}  // namespace
}  // namespace sluice::text
