// serve/socket.h — is the client of a request still connected?
//
// cpp-httplib 0.11 runs a handler without telling it the connection's socket,
// and a handler that computes for minutes must notice a client that left. The
// socket is found by its addresses (local and peer address and port are unique
// per TCP connection) and then watched with poll(). Linux-specific, like the
// rest of the server's I/O.
#pragma once
#include <sys/socket.h>

#include <functional>
#include <string>

namespace sluice::serve {

// The open socket whose local end is local_addr:local_port and whose peer is
// remote_addr:remote_port; -1 if there is none. The fd stays valid while the
// handler that owns the connection runs.
int find_connection_fd(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port);

// The numeric address and port of an IPv4 or IPv6 socket address; false for other families.
bool addr_port(const sockaddr_storage& ss, std::string* addr, int* port);

// Every connected IPv4/IPv6 socket of this process (listeners skipped), with its
// local and peer ends; visit returns false to stop the walk.
struct SocketEnds {
  int fd = -1;
  std::string local_addr, peer_addr;
  int local_port = 0, peer_port = 0;
};
void for_each_connected_socket(const std::function<bool(const SocketEnds&)>& visit);

// True when the peer closed (FIN, even with bytes the server has not read yet)
// or reset the connection. HTTP clients do not half-close while they wait for a
// reply, so a FIN means the client is gone. False for fd < 0.
bool peer_closed(int fd);

}  // namespace sluice::serve
