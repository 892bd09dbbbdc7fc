#include "cli/token_list.h"

#include <cctype>

#include "base/error.h"

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
