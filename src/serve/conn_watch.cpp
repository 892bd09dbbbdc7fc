#include "serve/conn_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <vector>

namespace sluice::serve {

namespace {

bool addr_port(const sockaddr_storage& ss, std::string* addr, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    *port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    *port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  *addr = buf;
  return true;
}

}  // namespace

void ConnWatch::set_busy(const std::string& peer_addr, int peer_port, bool busy) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = conns_[{peer_addr, peer_port}];
  if (e.busy && !busy) e.since = Clock::now();  // a reply finished: the next request's headers get a full limit
  if (!e.busy && !busy && e.since == Clock::time_point{}) e.since = Clock::now();
  e.busy = busy;
}

int ConnWatch::sweep(int local_port, double limit_s) {
  struct Conn {
    int fd;
    std::string addr;
    int port;
  };
  std::vector<Conn> found;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      long fd = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
      sockaddr_storage ls{}, ps{};
      socklen_t ll = sizeof ls, pl = sizeof ps;
      if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&ls), &ll) != 0) continue;
      std::string la, pa;
      int lp = 0, pp = 0;
      if (!addr_port(ls, &la, &lp) || lp != local_port) continue;
      if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&ps), &pl) != 0) continue;  // the listener
      if (!addr_port(ps, &pa, &pp)) continue;
      found.push_back({int(fd), pa, pp});
    }
    closedir(d);
  }
  const auto now = Clock::now();
  const auto limit = std::chrono::duration<double>(limit_s);
  int closed = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, e] : conns_) e.seen = false;
  for (const Conn& c : found) {
    auto it = conns_.find({c.addr, c.port});
    if (it == conns_.end()) it = conns_.emplace(std::make_pair(c.addr, c.port), Entry{false, now, false}).first;
    Entry& e = it->second;
    e.seen = true;
    if (e.since == Clock::time_point{}) e.since = now;
    if (!e.busy && now - e.since > limit) {
      // Still the same connection (the fd may have been closed and reused since the scan)?
      sockaddr_storage ps{};
      socklen_t pl = sizeof ps;
      std::string pa;
      int pp = 0;
      if (getpeername(c.fd, reinterpret_cast<sockaddr*>(&ps), &pl) != 0 || !addr_port(ps, &pa, &pp) ||
          pa != c.addr || pp != c.port)
        continue;
      // The thread reading it sees end of file and closes it.
      shutdown(c.fd, SHUT_RDWR);
      closed++;
    }
  }
  // Busy entries stay even if the scan missed them (a connection accepted after it).
  for (auto it = conns_.begin(); it != conns_.end();)
    it = it->second.seen || it->second.busy ? std::next(it) : conns_.erase(it);
  return closed;
}

}  // namespace sluice::serve
