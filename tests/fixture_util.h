// tests/fixture_util.h — reading the golden fixture's files in tests.
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace sluice::testing {

inline std::string fixture_dir() { return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny"; }
inline std::string fixture_model() { return fixture_dir() + "/model"; }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "missing fixture file " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

template <typename T>
std::vector<T> read_array(const std::string& path) {
  std::string bytes = read_text(path);
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace sluice::testing
