#include "base/bytes.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace sluice {

uint64_t parse_byte_size(const std::string& text, const std::string& flag, bool allow_zero) {
  const std::string example = "expected a size like 1000000, 512M (MiB), 16G (GiB) or 16GB (1e9 bytes), got '" +
                              text + "'";
  const char* s = text.c_str();
  char* end = nullptr;
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) fail(flag, example);
  const double v = std::strtod(s, &end);
  if (end == s || !std::isfinite(v)) fail(flag, example);
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  static const char kLetters[] = "KMGT";
  double mult = 1;
  if (!unit.empty() && unit != "B") {
    const char* at = unit.size() <= 3 ? std::strchr(kLetters, unit[0]) : nullptr;
    const std::string rest = unit.substr(1);
    if (!at || !(rest.empty() || rest == "B" || rest == "IB"))
      fail(flag, "unknown size unit '" + std::string(end) + "' in '" + text + "' (use K, M, G, T; KB.. for 1000s)");
    const int power = int(at - kLetters) + 1;
    mult = std::pow(rest == "B" ? 1000.0 : 1024.0, power);
  }
  const double bytes = v * mult;
  if (bytes >= 1.8e19) fail(flag, "'" + text + "' is too large");
  if (bytes < 1 && !(allow_zero && bytes == 0)) fail(flag, "size must be positive, got '" + text + "'");
  return uint64_t(bytes);
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double b = double(bytes);
  int u = 0;
  while (b >= 1024 && u < 5) b /= 1024, u++;
  char buf[40];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, b >= 100 ? "%.0f %s" : b >= 10 ? "%.1f %s" : "%.2f %s", b, units[u]);
  return buf;
}

std::string size_flag_at_least(uint64_t bytes) {
  static const char units[] = "KMGT";
  uint64_t scale = 1;
  int u = -1;
  while (u < 3 && bytes >= scale * 1024 * 10) scale *= 1024, u++;  // keep at least two digits
  const uint64_t n = (bytes + scale - 1) / scale;
  return std::to_string(n) + (u >= 0 ? std::string(1, units[u]) : std::string());
}

}  // namespace sluice
