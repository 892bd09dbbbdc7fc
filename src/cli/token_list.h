// cli/token_list.h — parsing token-id lists given on the command line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::cli {

// "448,259,309" or "448 259 309" -> ids. Throws naming `flag` on anything else.
std::vector<int> parse_token_list(const std::string& text, const std::string& flag);

}  // namespace sluice::cli

namespace sluice::cli {

// The ids of a text file under the model directory's tokenizer (no specials). Throws naming the file.
std::vector<int> tokenize_text_file(const std::string& model_dir, const std::string& path);

}  // namespace sluice::cli
