#include "cli/token_list.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "text/tokenizer.h"

namespace sluice::cli {

std::vector<int> parse_token_list(const std::string& text, const std::string& flag) {
  std::vector<int> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || std::isspace(static_cast<unsigned char>(text[i]))) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) j++;
    if (j == i || j - i > 9) fail(flag, "expected token ids separated by commas or spaces, got '" + text + "'");
    ids.push_back(std::stoi(text.substr(i, j - i)));
    i = j;
  }
  if (ids.empty()) fail(flag, "no token ids given");
  return ids;
}

}  // namespace sluice::cli

namespace sluice::cli {

uint64_t parse_byte_size(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(flag, "expected a size like 2000000, 512M or 4G, got '" + text + "'");
  }
  std::string unit = text.substr(used);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  double mult = 1;
  if (unit == "" || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
  else fail(flag, "unknown size unit in '" + text + "' (use K, M, G or T)");
  if (!(v > 0) || v * mult > 1e18) fail(flag, "size must be positive, got '" + text + "'");
  return uint64_t(v * mult);
}

}  // namespace sluice::cli

namespace sluice::cli {

std::vector<int> tokenize_text_file(const std::string& model_dir, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return text::Tokenizer::load(model_dir).encode(ss.str(), /*allow_special=*/false);
}

}  // namespace sluice::cli
