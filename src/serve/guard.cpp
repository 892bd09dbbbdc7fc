#include "serve/guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace sluice::serve {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

bool bearer_matches(const std::string& authorization, const std::string& key) {
  std::string a = trim(authorization);
  if (a.size() < 7 || lower(a.substr(0, 7)) != "bearer ") return false;
  const std::string given = trim(a.substr(7));
  // Compare every byte of the given value against the key (cycled), so the time depends
  // only on the given length.
  unsigned diff = given.size() != key.size();
  if (key.empty()) return false;
  for (size_t i = 0; i < given.size(); i++) diff |= unsigned(given[i]) ^ unsigned(key[i % key.size()]);
  return diff == 0;
}

bool host_allowed(const std::string& host_header, const std::string& bind_host,
                  const std::vector<std::string>& allowed) {
  std::string h = lower(trim(host_header));
  if (h.empty()) return true;
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return true;
  std::string name;
  if (h[0] == '[') {  // [v6]:port
    size_t close = h.find(']');
    if (close == std::string::npos) return false;
    name = h.substr(1, close - 1);
    in6_addr a6;
    if (inet_pton(AF_INET6, name.c_str(), &a6) == 1) return true;
  } else {
    size_t colon = h.rfind(':');
    name = colon == std::string::npos ? h : h.substr(0, colon);
    in_addr a4;
    if (inet_pton(AF_INET, name.c_str(), &a4) == 1) return true;
  }
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is localhost
  if (name == "localhost" || name == lower(bind_host)) return true;
  for (const std::string& a : allowed)
    if (name == lower(a)) return true;
  return false;
}

bool is_loopback_host(const std::string& host) {
  std::string h = lower(trim(host));
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h == "localhost" || h == "localhost.") return true;
  in_addr a4;
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6;
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) return a6.s6_addr[12] == 127;  // ::ffff:127.x.y.z
  }
  return false;
}

bool is_json_media_type(const std::string& content_type) {
  std::string t = lower(trim(content_type.substr(0, content_type.find(';'))));
  return t == "application/json";
}

}  // namespace sluice::serve
