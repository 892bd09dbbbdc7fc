#include "hub/hf_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

namespace sluice {
namespace {

namespace fs = std::filesystem;

// Sets (or unsets, with nullptr) the variables for one test, restoring them after.
struct Env {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const char* k, const char* v) {
    const char* old = std::getenv(k);
    saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
    if (v) setenv(k, v, 1);
    else unsetenv(k);
  }
  ~Env() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it)
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
  }
};

TEST(HfEnv, EndpointFromEnvironment) {
  Env e;
  e.set("HF_ENDPOINT", nullptr);
  EXPECT_EQ(hf_endpoint(), "https://huggingface.co");
  e.set("HF_ENDPOINT", "http://127.0.0.1:9999/");
  EXPECT_EQ(hf_endpoint(), "http://127.0.0.1:9999");
}

TEST(HfEnv, TokenFromVariableThenFiles) {
  const fs::path dir = fs::temp_directory_path() / ("hf-env-test-" + std::to_string(getpid()));
  fs::create_directories(dir / "home" / ".cache" / "huggingface");
  fs::create_directories(dir / "hfhome");
  std::ofstream(dir / "hfhome" / "token") << "  tok-from-hf-home\n";
  std::ofstream(dir / "home" / ".cache" / "huggingface" / "token") << "tok-from-cache\n";
  std::ofstream(dir / "path-token") << "tok-from-path";
  {
    Env e;
    e.set("HF_TOKEN", nullptr);
    e.set("HF_TOKEN_PATH", nullptr);
    e.set("XDG_CACHE_HOME", nullptr);
    e.set("HF_HOME", nullptr);
    e.set("HOME", (dir / "home").c_str());
    EXPECT_EQ(hf_token(), "tok-from-cache");
    e.set("HF_HOME", (dir / "hfhome").c_str());
    EXPECT_EQ(hf_token(), "tok-from-hf-home");
    e.set("HF_TOKEN_PATH", (dir / "path-token").c_str());
    EXPECT_EQ(hf_token(), "tok-from-path");
    e.set("HF_TOKEN", "tok-from-env");
    EXPECT_EQ(hf_token(), "tok-from-env");
    e.set("HF_TOKEN", nullptr);
    e.set("HF_TOKEN_PATH", nullptr);
    e.set("HF_HOME", (dir / "nowhere").c_str());
    EXPECT_EQ(hf_token(), "");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice
