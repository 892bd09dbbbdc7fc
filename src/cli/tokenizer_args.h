// cli/tokenizer_args.h — the options `tokenize` and `detokenize` share to pick a vocabulary.
//
// --model DIR loads K3's files from a model directory; --tiktoken FILE loads any
// tiktoken vocabulary (optionally --config for special tokens, --pattern /
// --pattern-file for its split pattern, K3's by default, and --safety-splits).
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "text/tokenizer.h"

namespace sluice::cli {

struct TokenizerArgs {
  std::string model_dir, tiktoken, config, pattern, pattern_file;
  bool safety_splits = false;
};

inline void add_tokenizer_options(CLI::App& sub, TokenizerArgs& a) {
  auto* model = sub.add_option("-m,--model", a.model_dir, "model directory (tiktoken.model + tokenizer_config.json)");
  auto* tk = sub.add_option("--tiktoken", a.tiktoken, "a tiktoken vocabulary file instead of --model");
  model->excludes(tk);
  sub.add_option("--config", a.config, "tokenizer_config.json with special tokens (with --tiktoken)")->needs(tk);
  auto* pat = sub.add_option("--pattern", a.pattern, "split pattern (with --tiktoken; default: K3's)")->needs(tk);
  sub.add_option("--pattern-file", a.pattern_file, "file holding the split pattern")->needs(tk)->excludes(pat);
  sub.add_flag("--safety-splits", a.safety_splits, "K3's 400,000/25,000-char cuts (with --tiktoken; --model has them)")
      ->needs(tk);
}

inline text::Tokenizer load_tokenizer(const TokenizerArgs& a) {
  if (!a.model_dir.empty()) return text::Tokenizer::load(a.model_dir);
  if (a.tiktoken.empty()) throw Error("give --model DIR or --tiktoken FILE");
  std::string pattern = a.pattern.empty() ? std::string(text::kK3Pattern) : a.pattern;
  if (!a.pattern_file.empty()) {
    std::ifstream f(a.pattern_file, std::ios::binary);
    if (!f) throw Error(a.pattern_file + ": cannot open");
    std::ostringstream ss;
    ss << f.rdbuf();
    pattern = ss.str();
    while (!pattern.empty() && (pattern.back() == '\n' || pattern.back() == '\r')) pattern.pop_back();
  }
  return text::Tokenizer::from_files(a.tiktoken, a.config, pattern, a.safety_splits);
}

inline std::string read_input_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return std::move(ss).str();
}

}  // namespace sluice::cli
