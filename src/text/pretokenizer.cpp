// text/pretokenizer.cpp — pattern translation (Rust regex -> PCRE2) and the PCRE2 matcher.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pretokenizer.h"

#include <pcre2.h>

#include <cctype>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/error.h"
#include "text/utf8.h"

namespace sluice::text {

const char* const kK3Pattern =
    R"([\p{Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";

namespace {

// Unicode White_Space as a class body (Rust's \s); see the header.
constexpr std::string_view kWhiteSpaceItems = R"(\t-\r\x{85}\p{Z})";

[[noreturn]] void bad_pattern(std::string_view why) {
  throw Error("pre-tokenizer pattern: " + std::string(why));
}

// ---- general categories as bit sets over the 30 two-letter categories ----

constexpr const char* kMinorCategories[30] = {
    "Cc", "Cf", "Cn", "Co", "Cs", "Ll", "Lm", "Lo", "Lt", "Lu", "Mc", "Me", "Mn", "Nd", "Nl",
    "No", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "Sc", "Sk", "Sm", "So", "Zl", "Zp", "Zs"};
constexpr uint32_t kAllCategories = (1u << 30) - 1;

uint32_t major_mask(char major) {
  uint32_t m = 0;
  for (int i = 0; i < 30; i++)
    if (kMinorCategories[i][0] == major) m |= 1u << i;
  return m;
}

std::string normalize_name(std::string_view name) {
  std::string out;
  for (char c : name)
    if (c != '_' && c != ' ' && c != '-') out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Short general-category name for a (normalized) short or long name, or "".
std::string canonical_category(std::string_view name) {
  static const std::pair<const char*, const char*> kLong[] = {
      {"letter", "L"}, {"casedletter", "L&"}, {"lc", "L&"}, {"l&", "L&"},
      {"uppercaseletter", "Lu"}, {"lowercaseletter", "Ll"}, {"titlecaseletter", "Lt"},
      {"modifierletter", "Lm"}, {"otherletter", "Lo"}, {"mark", "M"}, {"combiningmark", "M"},
      {"nonspacingmark", "Mn"}, {"spacingmark", "Mc"}, {"enclosingmark", "Me"},
      {"number", "N"}, {"decimalnumber", "Nd"}, {"digit", "Nd"}, {"letternumber", "Nl"},
      {"othernumber", "No"}, {"punctuation", "P"}, {"punct", "P"},
      {"connectorpunctuation", "Pc"}, {"dashpunctuation", "Pd"}, {"openpunctuation", "Ps"},
      {"closepunctuation", "Pe"}, {"initialpunctuation", "Pi"}, {"finalpunctuation", "Pf"},
      {"otherpunctuation", "Po"}, {"symbol", "S"}, {"mathsymbol", "Sm"},
      {"currencysymbol", "Sc"}, {"modifiersymbol", "Sk"}, {"othersymbol", "So"},
      {"separator", "Z"}, {"spaceseparator", "Zs"}, {"lineseparator", "Zl"},
      {"paragraphseparator", "Zp"}, {"other", "C"}, {"control", "Cc"}, {"cntrl", "Cc"},
      {"format", "Cf"}, {"unassigned", "Cn"}, {"privateuse", "Co"}, {"surrogate", "Cs"}};
  std::string n = normalize_name(name);
  for (const char* major : {"c", "l", "m", "n", "p", "s", "z"})
    if (n == major) return std::string(1, char(std::toupper(major[0])));
  for (const char* minor : kMinorCategories)
    if (n == normalize_name(minor)) return minor;
  for (auto& [longname, shortname] : kLong)
    if (n == longname) return shortname;
  return "";
}

uint32_t category_mask(const std::string& shortname) {
  if (shortname == "L&") return major_mask('L') & ~((1u << 6) | (1u << 7));  // Lu Ll Lt
  if (shortname.size() == 1) return major_mask(shortname[0]);
  for (int i = 0; i < 30; i++)
    if (shortname == kMinorCategories[i]) return 1u << i;
  return 0;
}

// Class items for a set of categories, using one-letter names where a whole
// major category is present.
std::string category_items(uint32_t mask) {
  std::string out;
  for (char major : {'C', 'L', 'M', 'N', 'P', 'S', 'Z'}) {
    uint32_t mm = major_mask(major);
    if ((mask & mm) == mm) {
      out += std::string("\\p{") + major + "}";
      mask &= ~mm;
    }
  }
  for (int i = 0; i < 30; i++)
    if (mask & (1u << i)) out += std::string("\\p{") + kMinorCategories[i] + "}";
  return out;
}

bool is_pcre2_script(const std::string& name) {
  std::string probe = "\\p{sc=" + name + "}";
  int err;
  PCRE2_SIZE off;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(probe.data()), probe.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) return false;
  pcre2_code_free(code);
  return true;
}

// ---- parsing ----

struct ClassNode;

struct ClassItem {
  std::string text;                  // PCRE2 text valid inside [...] (empty for a nested class)
  uint32_t categories = 0;           // non-zero: the item is exactly this union of categories
  std::unique_ptr<ClassNode> nested;
};

// [^? operand && operand && ...], each operand a union of items.
struct ClassNode {
  bool negated = false;
  std::vector<std::vector<ClassItem>> operands;
};

struct Parser {
  std::string_view p;
  size_t i = 0;

  bool at(std::string_view s) const { return p.substr(i, s.size()) == s; }

  // Copies one (possibly multi-byte) character.
  std::string take_char() {
    auto* u = reinterpret_cast<const unsigned char*>(p.data());
    Utf8Step st = utf8_step(u + i, p.size() - i);
    size_t n = st.kind == Utf8Kind::valid ? st.len : 1;
    std::string out(p.substr(i, n));
    i += n;
    return out;
  }

  // At a backslash followed by p or P. Returns the rewritten escape; sets *categories
  // when the property is a general category (negated ones complemented).
  std::string property(uint32_t* categories) {
    bool neg = p[i + 1] == 'P';
    i += 2;
    std::string name;
    if (i < p.size() && p[i] == '{') {
      size_t close = p.find('}', i);
      if (close == std::string_view::npos) bad_pattern("unterminated \\p{...}");
      name = std::string(p.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (i < p.size()) {
      name = take_char();
    } else {
      bad_pattern("dangling \\p");
    }
    if (name.size() > 1 && name[0] == '^') {  // \p{^X} is \P{X}
      neg = !neg;
      name = name.substr(1);
    }
    std::string prefix = neg ? "\\P{" : "\\p{";
    *categories = 0;
    if (name.find('=') != std::string::npos || name.find(':') != std::string::npos)
      return prefix + name + "}";
    std::string gc = canonical_category(name);
    if (!gc.empty()) {
      uint32_t m = category_mask(gc);
      *categories = neg ? (kAllCategories & ~m) : m;
      return prefix + gc + "}";
    }
    std::string n = normalize_name(name);
    if (n == "any" || n == "xan" || n == "xps" || n == "xsp" || n == "xwd" || n == "xuc")
      return prefix + name + "}";
    if (is_pcre2_script(name)) return prefix + "sc=" + name + "}";
    return prefix + name + "}";
  }

  // An escape inside or outside a class, other than \p, \s, \S. Copies it.
  std::string plain_escape() {
    std::string out = "\\";
    i++;
    if (i >= p.size()) bad_pattern("trailing backslash");
    if (p[i] == 'x' && i + 1 < p.size() && p[i + 1] == '{') {
      size_t close = p.find('}', i);
      if (close == std::string_view::npos) bad_pattern("unterminated \\x{...}");
      out += p.substr(i, close + 1 - i);
      i = close + 1;
      return out;
    }
    return out + take_char();
  }

  std::unique_ptr<ClassNode> parse_class() {  // at '['
    auto node = std::make_unique<ClassNode>();
    i++;
    if (i < p.size() && p[i] == '^') node->negated = true, i++;
    node->operands.emplace_back();
    bool first = true;
    while (true) {
      if (i >= p.size()) bad_pattern("unterminated character class");
      char c = p[i];
      auto& items = node->operands.back();
      if (c == ']' && !first) {
        i++;
        break;
      }
      first = false;
      if (at("&&")) {
        i += 2;
        node->operands.emplace_back();
        continue;
      }
      if (at("--") || at("~~")) bad_pattern("class difference/symmetric difference is not supported");
      ClassItem item;
      if (at("[:")) {
        size_t close = p.find(":]", i);
        if (close == std::string_view::npos) bad_pattern("unterminated [:class:]");
        item.text = std::string(p.substr(i, close + 2 - i));
        i = close + 2;
      } else if (c == '[') {
        item.nested = parse_class();
      } else if (c == '\\' && i + 1 < p.size() && (p[i + 1] == 'p' || p[i + 1] == 'P')) {
        item.text = property(&item.categories);
      } else if (at("\\s")) {
        item.text = std::string(kWhiteSpaceItems);
        i += 2;
      } else if (c == '\\') {
        item.text = plain_escape();
      } else {
        item.text = take_char();
      }
      items.push_back(std::move(item));
    }
    for (auto& op : node->operands)
      if (op.empty()) bad_pattern("empty operand in a class intersection");
    return node;
  }
};

// ---- emission ----

// The items of a union that can be written inside one PCRE2 [...]: atoms and
// positive, intersection-free nested classes. False if it cannot be flattened.
bool flatten(const std::vector<ClassItem>& items, std::string* out) {
  for (auto& it : items) {
    if (!it.nested) {
      *out += it.text;
      continue;
    }
    const ClassNode& n = *it.nested;
    if (n.negated || n.operands.size() != 1 || !flatten(n.operands[0], out)) return false;
  }
  return true;
}

// Union of general categories the operand is exactly, or 0.
uint32_t operand_categories(const std::vector<ClassItem>& items) {
  uint32_t m = 0;
  for (auto& it : items) {
    if (!it.categories) return 0;
    m |= it.categories;
  }
  return m;
}

std::string emit_class(const ClassNode& node);

std::string emit_union(const std::vector<ClassItem>& items) {
  std::string flat;
  if (flatten(items, &flat)) return "[" + flat + "]";
  std::string atoms, alts;
  for (auto& it : items) {
    if (it.nested)
      alts += "|" + emit_class(*it.nested);
    else
      atoms += it.text;
  }
  if (atoms.empty()) return "(?:" + alts.substr(1) + ")";
  return "(?:[" + atoms + "]" + alts + ")";
}

std::string emit_class(const ClassNode& node) {
  if (node.operands.size() == 1) {
    std::string flat;
    if (!node.negated) return emit_union(node.operands[0]);
    if (flatten(node.operands[0], &flat)) return "[^" + flat + "]";
    return "(?:(?!" + emit_union(node.operands[0]) + ")(?s:.))";
  }
  // Intersection. Write each operand as the complement of a flat item list when
  // possible: a union of categories is the complement of the other categories,
  // [^X] the complement of X. Then A && B == [^ X_A X_B].
  std::string excluded;
  bool all_complements = true;
  for (auto& op : node.operands) {
    uint32_t cats = operand_categories(op);
    std::string flat;
    if (cats) {
      excluded += category_items(kAllCategories & ~cats);
    } else if (op.size() == 1 && op[0].nested && op[0].nested->negated &&
               op[0].nested->operands.size() == 1 && flatten(op[0].nested->operands[0], &flat)) {
      excluded += flat;
    } else {
      all_complements = false;
      break;
    }
  }
  if (all_complements) {
    if (excluded.empty()) return node.negated ? "(?s:.)" : "(?!)";
    return node.negated ? "[" + excluded + "]" : "[^" + excluded + "]";
  }
  std::string both;
  for (size_t k = 1; k < node.operands.size(); k++) both += "(?=" + emit_union(node.operands[k]) + ")";
  both += emit_union(node.operands[0]);
  if (node.negated) return "(?:(?!" + both + ")(?s:.))";
  return "(?:" + both + ")";
}

}  // namespace

std::string translate_pattern(std::string_view pattern) {
  Parser ps{pattern};
  std::string out;
  while (ps.i < pattern.size()) {
    char c = pattern[ps.i];
    if (c == '[') {
      out += emit_class(*ps.parse_class());
    } else if (c == '\\' && ps.i + 1 < pattern.size() &&
               (pattern[ps.i + 1] == 'p' || pattern[ps.i + 1] == 'P')) {
      uint32_t cats;
      out += ps.property(&cats);
    } else if (ps.at("\\s")) {
      out += "[" + std::string(kWhiteSpaceItems) + "]";
      ps.i += 2;
    } else if (ps.at("\\S")) {
      out += "[^" + std::string(kWhiteSpaceItems) + "]";
      ps.i += 2;
    } else if (c == '\\') {
      out += ps.plain_escape();
    } else {
      out += ps.take_char();
    }
  }
  return out;
}

// ---- compiled pattern and matcher ----

Pretokenizer::Pretokenizer(std::string_view pattern)
    : pattern_(pattern), translated_(translate_pattern(pattern)) {
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE off = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C,
                        &err, &off, cc);
  pcre2_compile_context_free(cc);
  if (!code_) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error("pre-tokenizer pattern: PCRE2 rejects the translated pattern at offset " +
                std::to_string(off) + ": " + reinterpret_cast<char*>(msg) + " (pattern: " +
                translated_ + ")");
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::Pretokenizer(Pretokenizer&& o) noexcept
    : pattern_(std::move(o.pattern_)),
      translated_(std::move(o.translated_)),
      code_(std::exchange(o.code_, nullptr)),
      jit_(o.jit_) {}

Pretokenizer& Pretokenizer::operator=(Pretokenizer&& o) noexcept {
  if (this != &o) {
    if (code_) pcre2_code_free(code_);
    pattern_ = std::move(o.pattern_);
    translated_ = std::move(o.translated_);
    code_ = std::exchange(o.code_, nullptr);
    jit_ = o.jit_;
  }
  return *this;
}

Pretokenizer::~Pretokenizer() {
  if (code_) pcre2_code_free(code_);
}

PieceMatcher::PieceMatcher(const Pretokenizer& pre) : pre_(pre) {
  md_ = pcre2_match_data_create(1, nullptr);  // only the whole match is needed
  if (!md_) throw Error("pre-tokenizer: out of memory for PCRE2 match data");
}

PieceMatcher::~PieceMatcher() { pcre2_match_data_free(md_); }

void PieceMatcher::reset(std::string_view valid_utf8) {
  text_ = valid_utf8;
  pos_ = 0;
}

bool PieceMatcher::next(size_t* begin, size_t* end) {
  auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
  while (pos_ < text_.size()) {
    int rc = pre_.jit_ ? pcre2_jit_match(pre_.code_, subject, text_.size(), pos_, 0, md_, nullptr)
                       : pcre2_match(pre_.code_, subject, text_.size(), pos_, PCRE2_NO_UTF_CHECK,
                                     md_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      pos_ = text_.size();
      return false;
    }
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(std::string("pre-tokenizer: PCRE2 match failed: ") + reinterpret_cast<char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
    size_t b = ov[0], e = ov[1];
    if (e == b) {  // an empty match yields no piece; step over one character
      if (b >= text_.size()) break;
      auto* u = reinterpret_cast<const unsigned char*>(text_.data());
      pos_ = b + utf8_step(u + b, text_.size() - b).len;
      continue;
    }
    pos_ = e;
    *begin = b;
    *end = e;
    return true;
  }
  pos_ = text_.size();
  return false;
}

}  // namespace sluice::text
