// The connection of a request is found by its addresses, and a peer that
// closed is noticed, on a real loopback TCP connection.
#include "serve/socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace sluice::serve {
namespace {

int port_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t l = sizeof a;
  if (peer)
    getpeername(fd, reinterpret_cast<sockaddr*>(&a), &l);
  else
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  return ntohs(a.sin_port);
}

TEST(Socket, FindsTheConnectionAndSeesThePeerLeave) {
  int lsock = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lsock, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lsock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(lsock, 1), 0);
  const int port = port_of(lsock, false);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  addr.sin_port = htons(uint16_t(port));
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  int server = accept(lsock, nullptr, nullptr);
  ASSERT_GE(server, 0);

  const int client_port = port_of(client, false);
  EXPECT_EQ(find_connection_fd("127.0.0.1", port, "127.0.0.1", client_port), server);
  EXPECT_EQ(find_connection_fd("127.0.0.1", port, "127.0.0.1", client_port + 1 == port ? 1 : client_port + 1), -1);

  EXPECT_FALSE(peer_closed(server));
  ASSERT_EQ(write(client, "x", 1), 1);  // unread data: still there
  EXPECT_FALSE(peer_closed(server));
  close(client);
  EXPECT_TRUE(peer_closed(server));
  EXPECT_FALSE(peer_closed(-1));
  close(server);
  close(lsock);
}

}  // namespace
}  // namespace sluice::serve
