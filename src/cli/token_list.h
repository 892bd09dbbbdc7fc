// cli/token_list.h — parsing token-id lists given on the command line.
#pragma once
#include <string>
#include <vector>

namespace sluice::cli {

// "448,259,309" or "448 259 309" -> ids. Throws naming `flag` on anything else.
std::vector<int> parse_token_list(const std::string& text, const std::string& flag);

}  // namespace sluice::cli
