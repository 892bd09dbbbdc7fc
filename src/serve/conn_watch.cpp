#include "serve/conn_watch.h"

#include <sys/socket.h>

#include <vector>

#include "serve/socket.h"

namespace sluice::serve {

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
  for_each_connected_socket([&](const SocketEnds& s) {
    if (s.local_port == local_port) found.push_back({s.fd, s.peer_addr, s.peer_port});
    return true;
  });
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
