#include "base/bytes.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace sluice {
namespace {

TEST(ByteSize, BinaryLettersDecimalWithB) {
  EXPECT_EQ(parse_byte_size("1000", "--x"), 1000u);
  EXPECT_EQ(parse_byte_size("512B", "--x"), 512u);
  EXPECT_EQ(parse_byte_size("2K", "--x"), 2048u);
  EXPECT_EQ(parse_byte_size("2k", "--x"), 2048u);
  EXPECT_EQ(parse_byte_size("2KiB", "--x"), 2048u);
  EXPECT_EQ(parse_byte_size("2KB", "--x"), 2000u);
  EXPECT_EQ(parse_byte_size("16G", "--x"), 16ull << 30);
  EXPECT_EQ(parse_byte_size("16gib", "--x"), 16ull << 30);
  EXPECT_EQ(parse_byte_size("16GB", "--x"), 16000000000ull);
  EXPECT_EQ(parse_byte_size("16gb", "--x"), 16000000000ull);
  EXPECT_EQ(parse_byte_size("500GB", "--x"), 500000000000ull);
  EXPECT_EQ(parse_byte_size("1.5M", "--x"), 3ull << 19);
  EXPECT_EQ(parse_byte_size("4 MiB", "--x"), 4ull << 20);
  EXPECT_EQ(parse_byte_size("2T", "--x"), 2ull << 40);
  EXPECT_EQ(parse_byte_size("0", "--x", /*allow_zero=*/true), 0u);
}

TEST(ByteSize, ErrorsNameTheFlag) {
  for (const char* bad : {"", "abc", "-1", "12X", "1GiBB", "0", "0.1", "1e30", "G"}) {
    try {
      parse_byte_size(bad, "--ram-budget");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--ram-budget: ", 0), 0u) << e.what();
    }
  }
}

TEST(ByteSize, FormatsInHumanUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(2048), "2.00 KiB");
  EXPECT_EQ(format_bytes(14889779), "14.2 MiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
  EXPECT_EQ(format_bytes(500ull << 30), "500 GiB");
}

TEST(ByteSize, SuggestionIsAtLeastTheSizeAndParses) {
  EXPECT_EQ(size_flag_at_least(14889779), "15M");
  EXPECT_EQ(size_flag_at_least(900), "900");
  EXPECT_EQ(size_flag_at_least(3ull << 30), "3072M");
  EXPECT_EQ(size_flag_at_least(30ull << 30), "30G");
  for (uint64_t b : {1ull, 1023ull, 10241ull, 14889779ull, (5ull << 30) + 1, 123456789012ull}) {
    const uint64_t back = parse_byte_size(size_flag_at_least(b), "--x");
    EXPECT_GE(back, b);
    EXPECT_LE(back, b + b / 9 + 1);  // never wildly above
  }
}

}  // namespace
}  // namespace sluice
