// base/: escaping for printed errors, JSON parsing of untrusted text, regular-file reads.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/escape.h"
#include "base/json_parse.h"
#include "base/read_file.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

TEST(Escape, ControlCharactersAreSpelledOutOnOneLine) {
  EXPECT_EQ(escape_control("shard: tensor 'x\nsecond line\x1b[31mRED\t\x7f'"),
            "shard: tensor 'x\\nsecond line\\x1b[31mRED\\t\\x7f'");
  const std::string utf8 = "caf\xc3\xa9";
  EXPECT_EQ(escape_control(utf8), utf8);  // bytes >= 0x80 pass
  EXPECT_LT(escape_control(std::string(10000, 'a')).size(), 2100u);
}

TEST(JsonParse, TranslatesLibraryErrorsAndCapsNesting) {
  try {
    parse_json("{\"a\": tru}", "f.json");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("f.json: not valid JSON: ", 0), 0u) << m;
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(parse_json("[[[[1]]]]", "f", 4));
  EXPECT_THROW(parse_json("[[[[[1]]]]]", "f", 4), Error);
  EXPECT_NO_THROW(parse_json("[\"[[[[[[[\"]", "f", 2));  // brackets in strings do not count
  EXPECT_THROW(parse_json(std::string(100 << 20, '['), "f"), Error);
}

TEST(ReadFile, OnlyRegularFiles) {
  const fs::path dir = fs::temp_directory_path() / ("sluice-readfile-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  std::ofstream(dir / "big") << std::string(100, 'x');
  std::ofstream(dir / "ok") << "hello";
  EXPECT_EQ(read_regular_file((dir / "ok").string(), 100), "hello");
  auto expect = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect([&] { read_regular_file((dir / "fifo").string(), 100); }, "is not a regular file");  // no hang
  expect([&] { read_regular_file((dir / "sub").string(), 100); }, "is a directory");
  expect([&] { read_regular_file((dir / "big").string(), 10); }, "larger than");
  expect([&] { read_regular_file((dir / "absent").string(), 10); }, "cannot open");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice
