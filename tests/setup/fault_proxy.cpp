// tests/setup/fault_proxy.cpp — a loopback HTTP proxy that injects faults, for the setup tests.
//
//   sluice_fault_proxy --upstream PORT --port-file FILE --log FILE [--rule SPEC]...
//
// Listens on 127.0.0.1 (a free port, written to FILE), forwards each GET to
// 127.0.0.1:PORT (nginx) with its Range and Authorization headers, and answers
// with "Connection: close". Redirects pass through unchanged (nginx sends
// relative Locations, so clients come back here). A rule applies a fault to
// some of the requests whose target contains a substring:
//   SPEC = key=value,...   match=A*B      the target contains A, then B (any number of parts)
//                          ranged=yes|no  only requests with / without Range (default: either)
//                          skip=N (let the first N matches through)   times=N (then fault N of them; default all)
//   and one action:        status=CODE    answer CODE without asking upstream
//                          cut=N          send the headers and N body bytes, then close
//                          stall=MS       send half the body, wait MS, send the rest
//                          ignore_range=1 ask upstream without Range: 200 and the whole file
//                          short=N        a 206 that carries only the first N bytes asked for
//                          corrupt=OFF    flip the byte at file offset OFF
// Each request is logged as one line: target, range, status, body bytes sent, fault.
// Written with plain sockets: it must not reinterpret Range itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Rule {
  std::string match, ranged = "any", action, value;
  long skip = 0, times = -1;
  std::atomic<long> seen{0};
};

std::deque<Rule> g_rules;  // a deque: rules hold atomics and never move
int g_upstream = 0;
std::mutex g_log_mu;
FILE* g_log = nullptr;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fault_proxy: %s\n", msg.c_str());
  std::exit(2);
}

void parse_rule(const std::string& spec) {
  Rule* r = &g_rules.emplace_back();
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string kv = spec.substr(start, comma - start);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) die("bad rule part '" + kv + "'");
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "match") r->match = v;
    else if (k == "ranged") r->ranged = v;
    else if (k == "skip") r->skip = std::atol(v.c_str());
    else if (k == "times") r->times = std::atol(v.c_str());
    else if (k == "status" || k == "cut" || k == "stall" || k == "ignore_range" || k == "short" || k == "corrupt")
      r->action = k, r->value = v;
    else die("unknown rule key '" + k + "'");
    start = comma + 1;
  }
  if (r->action.empty()) die("rule without an action: " + spec);
}

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

struct Head {
  std::string first;                          // request or status line
  std::map<std::string, std::string> fields;  // lower-case names
};

// Reads up to the end of the head; leftover body bytes go to `rest`.
bool read_head(int fd, Head* h, std::string* rest) {
  std::string buf;
  char tmp[4096];
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    ssize_t r = ::recv(fd, tmp, sizeof tmp, 0);
    if (r <= 0 || buf.size() > 65536) return false;
    buf.append(tmp, size_t(r));
  }
  *rest = buf.substr(end + 4);
  size_t pos = buf.find("\r\n");
  h->first = buf.substr(0, pos);
  while (pos < end) {
    size_t next = buf.find("\r\n", pos + 2);
    std::string line = buf.substr(pos + 2, next - pos - 2);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string k = line.substr(0, colon), v = line.substr(colon + 1);
      for (char& c : k) c = char(std::tolower(static_cast<unsigned char>(c)));
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      h->fields[k] = v;
    }
    pos = next;
  }
  return true;
}

struct Upstream {
  int status = 0;
  Head head;
  std::string body;
};

bool ask_upstream(const std::string& target, const std::string& range, const std::string& auth, Upstream* u) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(g_upstream));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return ::close(fd), false;
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!range.empty()) req += "Range: " + range + "\r\n";
  if (!auth.empty()) req += "Authorization: " + auth + "\r\n";
  req += "\r\n";
  if (!send_all(fd, req.data(), req.size()) || !read_head(fd, &u->head, &u->body)) return ::close(fd), false;
  char tmp[65536];
  for (ssize_t r; (r = ::recv(fd, tmp, sizeof tmp, 0)) > 0;) u->body.append(tmp, size_t(r));
  ::close(fd);
  u->status = std::atoi(u->head.first.c_str() + u->head.first.find(' ') + 1);
  return true;
}

void log_line(const std::string& target, const std::string& range, int status, size_t sent, const std::string& fault) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fprintf(g_log, "%s range=%s status=%d sent=%zu fault=%s\n", target.c_str(), range.empty() ? "-" : range.c_str(),
               status, sent, fault.empty() ? "-" : fault.c_str());
  std::fflush(g_log);
}

bool matches(const std::string& target, const std::string& pattern) {
  size_t at = 0, start = 0;
  while (start <= pattern.size()) {
    size_t star = pattern.find('*', start);
    if (star == std::string::npos) star = pattern.size();
    std::string part = pattern.substr(start, star - start);
    size_t found = target.find(part, at);
    if (found == std::string::npos) return false;
    at = found + part.size();
    start = star + 1;
  }
  return true;
}

void serve(int fd) {
  Head req;
  std::string rest;
  if (!read_head(fd, &req, &rest)) return;
  size_t sp1 = req.first.find(' '), sp2 = req.first.rfind(' ');
  std::string target = req.first.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string range = req.fields.count("range") ? req.fields["range"] : "";
  std::string auth = req.fields.count("authorization") ? req.fields["authorization"] : "";

  Rule* rule = nullptr;
  for (Rule& rule_ref : g_rules) {
    Rule* r = &rule_ref;
    if (!matches(target, r->match)) continue;
    if ((r->ranged == "yes" && range.empty()) || (r->ranged == "no" && !range.empty())) continue;
    long n = r->seen++;
    if (n < r->skip || (r->times >= 0 && n >= r->skip + r->times)) continue;
    rule = r;
    break;
  }
  const std::string action = rule ? rule->action : "";
  const std::string fault = rule ? action + "=" + rule->value : "";
  if (action == "status") {
    int code = std::atoi(rule->value.c_str());
    std::string body = "injected fault\n";
    std::string resp = "HTTP/1.1 " + std::to_string(code) + " Injected\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    send_all(fd, resp.data(), resp.size());
    log_line(target, range, code, body.size(), fault);
    return;
  }
  Upstream u;
  if (!ask_upstream(target, action == "ignore_range" ? "" : range, auth, &u)) {
    std::string resp = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    send_all(fd, resp.data(), resp.size());
    log_line(target, range, 502, 0, "upstream-down");
    return;
  }
  std::string content_range = u.head.fields.count("content-range") ? u.head.fields["content-range"] : "";
  uint64_t body_start = 0;
  if (u.status == 206) body_start = std::strtoull(content_range.c_str() + 6, nullptr, 10);  // "bytes A-B/T"
  if (action == "short" && u.status == 206) {
    size_t n = std::min<size_t>(std::strtoull(rule->value.c_str(), nullptr, 10), u.body.size());
    std::string total = content_range.substr(content_range.find('/'));
    u.body.resize(n);
    content_range = "bytes " + std::to_string(body_start) + "-" + std::to_string(body_start + n - 1) + total;
  }
  if (action == "corrupt") {
    uint64_t off = std::strtoull(rule->value.c_str(), nullptr, 10);
    if (off >= body_start && off < body_start + u.body.size()) u.body[size_t(off - body_start)] ^= 0x5a;
  }
  std::string head = "HTTP/1.1 " + std::to_string(u.status) + " Proxied\r\nContent-Length: " +
                     std::to_string(u.body.size()) + "\r\nConnection: close\r\n";
  if (!content_range.empty()) head += "Content-Range: " + content_range + "\r\n";
  for (const char* k : {"content-type", "location", "etag", "accept-ranges"})
    if (u.head.fields.count(k)) head += std::string(k) + ": " + u.head.fields[k] + "\r\n";
  head += "\r\n";
  if (!send_all(fd, head.data(), head.size())) return;
  size_t sent = u.body.size();
  if (action == "cut") {
    sent = std::min<size_t>(std::strtoull(rule->value.c_str(), nullptr, 10), u.body.size());
    send_all(fd, u.body.data(), sent);
  } else if (action == "stall") {
    size_t half = u.body.size() / 2;
    send_all(fd, u.body.data(), half);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(rule->value.c_str())));
    if (!send_all(fd, u.body.data() + half, u.body.size() - half)) sent = half;
  } else {
    send_all(fd, u.body.data(), u.body.size());
  }
  log_line(target, range, u.status, sent, fault);
}

}  // namespace

int main(int argc, char** argv) {
  std::string port_file, log_file;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) die("missing value after " + a);
    std::string v = argv[++i];
    if (a == "--upstream") g_upstream = std::atoi(v.c_str());
    else if (a == "--port-file") port_file = v;
    else if (a == "--log") log_file = v;
    else if (a == "--rule") parse_rule(v);
    else die("unknown option " + a);
  }
  if (!g_upstream || port_file.empty() || log_file.empty()) die("need --upstream, --port-file and --log");
  g_log = std::fopen(log_file.c_str(), "a");
  if (!g_log) die("cannot open " + log_file);
  std::signal(SIGPIPE, SIG_IGN);

  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 64) != 0) die("cannot listen");
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  {
    std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << ntohs(a.sin_port) << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  for (;;) {
    int fd = ::accept(ls, nullptr, nullptr);
    if (fd < 0) continue;
    std::thread([fd] {
      serve(fd);
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
    }).detach();
  }
}
