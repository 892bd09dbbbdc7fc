// cli/cmd_tokenize.cpp — `sluice tokenize`: text -> token ids.
//
//   sluice tokenize --model DIR --text "..." [--special]   ids on one line
//   sluice tokenize ... --file PATH                        the file's bytes
//   sluice tokenize ... --lines PATH                       one JSON string per line in,
//                                                          one line of ids per line out
//   sluice tokenize ... --file PATH --bench N              encode N times, print throughput
#include <chrono>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/tokenizer_args.h"

namespace sluice::cli {
namespace {

struct TokenizeArgs {
  TokenizerArgs vocab;
  std::string text, file, lines;
  bool special = false;
  int bench = 0;
};

void append_ids(std::string& out, const std::vector<int>& ids) {
  char buf[16];
  for (size_t i = 0; i < ids.size(); i++) {
    int n = std::snprintf(buf, sizeof buf, i ? " %d" : "%d", ids[i]);
    out.append(buf, n);
  }
  out += '\n';
}

int run_tokenize(const TokenizeArgs& a) {
  text::Tokenizer tok = load_tokenizer(a.vocab);
  std::string out;
  if (!a.lines.empty()) {
    std::string data = read_input_file(a.lines);
    size_t pos = 0, line_no = 0;
    std::vector<int> ids;
    while (pos < data.size()) {
      size_t eol = data.find('\n', pos);
      if (eol == std::string::npos) eol = data.size();
      std::string_view line(data.data() + pos, eol - pos);
      pos = eol + 1;
      line_no++;
      nlohmann::json s = nlohmann::json::parse(line, nullptr, false);
      if (!s.is_string()) fail(a.lines + ":" + std::to_string(line_no), "expected a JSON string");
      ids.clear();
      tok.encode_into(s.get_ref<const std::string&>(), a.special, ids);
      append_ids(out, ids);
    }
  } else if (a.bench > 0) {
    if (a.file.empty()) throw Error("--bench needs --file");
    std::string data = read_input_file(a.file);
    double best = 1e30, total = 0;
    size_t n_tokens = 0;
    for (int r = 0; r < a.bench; r++) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<int> ids = tok.encode(data, a.special);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s), total += s;
      n_tokens = ids.size();
    }
    std::printf("{\"bytes\":%zu,\"tokens\":%zu,\"best_s\":%.4f,\"mean_s\":%.4f,\"mb_per_s\":%.2f}\n",
                data.size(), n_tokens, best, total / a.bench, data.size() / best / 1e6);
    return 0;
  } else {
    std::string input = !a.file.empty() ? read_input_file(a.file) : a.text;
    append_ids(out, tok.encode(input, a.special));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

Command reg("tokenize", "Encode text into token ids", [](CLI::App& sub, Action* act) {
  auto a = std::make_shared<TokenizeArgs>();
  add_tokenizer_options(sub, a->vocab);
  auto* text = sub.add_option("--text", a->text, "text to encode");
  auto* file = sub.add_option("--file", a->file, "encode the bytes of this file");
  auto* lines = sub.add_option("--lines", a->lines, "file with one JSON string per line; one line of ids each");
  text->excludes(file)->excludes(lines);
  file->excludes(lines);
  sub.add_flag("--special", a->special, "parse special-token spellings into their ids");
  sub.add_option("--bench", a->bench, "encode --file this many times and print throughput (one thread)");
  *act = [a, text, file, lines] {
    if (!text->count() && !file->count() && !lines->count())
      throw Error("tokenize: give --text, --file or --lines");
    return run_tokenize(*a);
  };
});

}  // namespace
}  // namespace sluice::cli
