// serve/socket.h — is the client of a request still connected?
//
// cpp-httplib 0.11 runs a handler without telling it the connection's socket,
// and a handler that computes for minutes must notice a client that left. The
// socket is found by its addresses (local and peer address and port are unique
// per TCP connection) and then watched with poll(). Linux-specific, like the
// rest of the server's I/O.
#pragma once
#include <string>

namespace sluice::serve {

// The open socket whose local end is local_addr:local_port and whose peer is
// remote_addr:remote_port; -1 if there is none. The fd stays valid while the
// handler that owns the connection runs.
int find_connection_fd(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port);

// True when the peer closed (FIN, even with bytes the server has not read yet)
// or reset the connection. HTTP clients do not half-close while they wait for a
// reply, so a FIN means the client is gone. False for fd < 0.
bool peer_closed(int fd);

}  // namespace sluice::serve
