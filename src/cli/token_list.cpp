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

std::vector<int> tokenize_text_file(const std::string& model_dir, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return text::Tokenizer::load(model_dir).encode(ss.str(), /*allow_special=*/false);
}

}  // namespace sluice::cli
