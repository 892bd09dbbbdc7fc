#include "serve/socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace sluice::serve {

// Numeric address and port of a socket address (IPv4 or IPv6).
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

void for_each_connected_socket(const std::function<bool(const SocketEnds&)>& visit) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    sockaddr_storage ls{}, ps{};
    socklen_t ll = sizeof ls, pl = sizeof ps;
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&ls), &ll) != 0) continue;
    if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&ps), &pl) != 0) continue;  // a listener
    SocketEnds s;
    s.fd = int(fd);
    if (!addr_port(ls, &s.local_addr, &s.local_port) || !addr_port(ps, &s.peer_addr, &s.peer_port)) continue;
    if (!visit(s)) break;
  }
  closedir(d);
}

int find_connection_fd(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port) {
  int found = -1, port_only = -1, port_matches = 0;
  for_each_connected_socket([&](const SocketEnds& s) {
    if (s.local_port != local_port || s.peer_port != remote_port) return true;
    port_only = s.fd;
    port_matches++;
    if (s.local_addr == local_addr && s.peer_addr == remote_addr) {
      found = s.fd;
      return false;
    }
    return true;
  });
  // Address spellings can differ (IPv4-mapped IPv6); the ports alone decide when unambiguous.
  if (found < 0 && port_matches == 1) found = port_only;
  return found;
}

bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL | POLLRDHUP)) return true;
  if (p.revents & POLLIN) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
  }
  return false;
}

}  // namespace sluice::serve
