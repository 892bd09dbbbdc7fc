// cli/cmd_detokenize.cpp — `sluice detokenize`: token ids -> text.
//
//   sluice detokenize --model DIR --ids "1 2 3" [--hide-special] [--raw]
//   sluice detokenize ... --lines PATH    one line of ids in, one JSON string per line out
// Text is decoded lossily (ill-formed UTF-8 -> U+FFFD) unless --raw.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/tokenizer_args.h"

namespace sluice::cli {
namespace {

struct DetokenizeArgs {
  TokenizerArgs vocab;
  std::string ids, lines;
  bool hide_special = false, raw = false;
};

std::vector<int> parse_ids(std::string_view s, const std::string& where) {
  std::vector<int> ids;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ' ' || s[i] == ',' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
      i++;
      continue;
    }
    long long v = 0;
    size_t b = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - b < 10) v = v * 10 + (s[i++] - '0');
    if (i == b || (i < s.size() && s[i] != ' ' && s[i] != ',' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n'))
      fail(where, "ids must be non-negative integers separated by spaces");
    ids.push_back(int(v));
  }
  return ids;
}

int run_detokenize(const DetokenizeArgs& a) {
  text::Tokenizer tok = load_tokenizer(a.vocab);
  auto decode = [&](const std::vector<int>& ids) {
    return a.raw ? tok.decode_bytes(ids, !a.hide_special) : tok.decode(ids, !a.hide_special);
  };
  std::string out;
  if (!a.lines.empty()) {
    std::string data = read_input_file(a.lines);
    size_t pos = 0, line_no = 0;
    while (pos < data.size()) {
      size_t eol = data.find('\n', pos);
      if (eol == std::string::npos) eol = data.size();
      std::string_view line(data.data() + pos, eol - pos);
      pos = eol + 1;
      line_no++;
      std::string text = decode(parse_ids(line, a.lines + ":" + std::to_string(line_no)));
      out += nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      out += '\n';
    }
  } else {
    out = decode(parse_ids(a.ids, "--ids"));
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

Command reg("detokenize", "Decode token ids into text", [](CLI::App& sub, Action* act) {
  auto a = std::make_shared<DetokenizeArgs>();
  add_tokenizer_options(sub, a->vocab);
  auto* ids = sub.add_option("--ids", a->ids, "token ids separated by spaces");
  auto* lines = sub.add_option("--lines", a->lines, "file with one line of ids per text; prints JSON strings");
  ids->excludes(lines);
  sub.add_flag("--hide-special", a->hide_special, "leave special tokens out of the text");
  sub.add_flag("--raw", a->raw, "write the raw token bytes (no U+FFFD replacement)");
  *act = [a, ids, lines] {
    if (!ids->count() && !lines->count()) throw Error("detokenize: give --ids or --lines");
    return run_detokenize(*a);
  };
});

}  // namespace
}  // namespace sluice::cli
