#include "hub/hf_env.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sluice {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws) == std::string::npos ? s.size() : s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

std::string read_token_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::ostringstream ss;
  ss << f.rdbuf();
  return trim(ss.str());
}

}  // namespace

std::string hf_endpoint() {
  std::string e = trim(env("HF_ENDPOINT"));
  if (e.empty()) e = "https://huggingface.co";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

std::string hf_token() {
  if (std::string t = trim(env("HF_TOKEN")); !t.empty()) return t;
  if (std::string p = env("HF_TOKEN_PATH"); !p.empty()) return read_token_file(p);
  std::string home = env("HF_HOME");
  if (home.empty()) {
    std::string cache = env("XDG_CACHE_HOME");
    if (cache.empty() && !env("HOME").empty()) cache = env("HOME") + "/.cache";
    if (cache.empty()) return "";
    home = cache + "/huggingface";
  }
  return read_token_file(home + "/token");
}

}  // namespace sluice
