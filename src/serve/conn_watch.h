// serve/conn_watch.h — bounds the time a connection may spend sending a request's headers.
//
// cpp-httplib's read timeout applies to each recv, so a client sending one
// header byte a second holds a server thread forever; a hundred of them starve
// /health. The server marks a connection busy from the moment its headers are
// parsed until its reply is written; sweep(), called about twice a second, shuts
// down connections that have been idle (between requests, or still sending
// headers) longer than the limit. Connections are known by their peer address
// and port and found among the process's sockets (as serve/socket.h does).
#pragma once
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace sluice::serve {

class ConnWatch {
 public:
  void set_busy(const std::string& peer_addr, int peer_port, bool busy);
  // Shuts down connections to `local_port` idle longer than `limit_s`; returns how many.
  int sweep(int local_port, double limit_s);

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    bool busy = false;
    Clock::time_point since;  // when it last became idle (or was first seen)
    bool seen = false;
  };
  std::mutex mu_;
  std::map<std::pair<std::string, int>, Entry> conns_;
};

}  // namespace sluice::serve
