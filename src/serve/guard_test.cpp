#include "serve/guard.h"

#include <gtest/gtest.h>

namespace sluice::serve {
namespace {

TEST(Guard, BearerKey) {
  EXPECT_TRUE(bearer_matches("Bearer sk-123", "sk-123"));
  EXPECT_TRUE(bearer_matches("bearer sk-123", "sk-123"));  // the scheme is case-insensitive
  EXPECT_TRUE(bearer_matches("BEARER  sk-123 ", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-124", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-12", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-1234", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer SK-123", "sk-123"));  // the key is not
  EXPECT_FALSE(bearer_matches("Basic sk-123", "sk-123"));
  EXPECT_FALSE(bearer_matches("sk-123", "sk-123"));
  EXPECT_FALSE(bearer_matches("", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer ", ""));
}

TEST(Guard, HostHeader) {
  const std::vector<std::string> none;
  for (const char* ok : {"", "127.0.0.1:8000", "127.0.0.1", "localhost:8000", "LocalHost", "localhost.:1",
                         "[::1]:8000", "[::1]", "10.1.2.3:80"})
    EXPECT_TRUE(host_allowed(ok, "127.0.0.1", none)) << ok;
  for (const char* bad : {"evil.example:8000", "evil.example", "localhost.evil.example", "127.0.0.1.nip.io:8000",
                          "[::1", "[evil]:80"})
    EXPECT_FALSE(host_allowed(bad, "127.0.0.1", none)) << bad;
  EXPECT_TRUE(host_allowed("myhost:8000", "myhost", none));  // the bind name itself
  EXPECT_TRUE(host_allowed("gpu-box.lan:8000", "0.0.0.0", {"gpu-box.lan"}));
  EXPECT_FALSE(host_allowed("other.lan:8000", "0.0.0.0", {"gpu-box.lan"}));
  EXPECT_TRUE(host_allowed("anything.example", "0.0.0.0", {"*"}));
}

TEST(Guard, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LocalHost", "::ffff:127.0.0.1"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h : {"0.0.0.0", "::", "[::]", "192.168.1.5", "10.0.0.1", "example.com", "128.0.0.1", "::ffff:10.0.0.1", ""})
    EXPECT_FALSE(is_loopback_host(h)) << h;
}

TEST(Guard, JsonMediaType) {
  EXPECT_TRUE(is_json_media_type("application/json"));
  EXPECT_TRUE(is_json_media_type("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(is_json_media_type("text/plain"));
  EXPECT_FALSE(is_json_media_type("text/plain; application/json"));
  EXPECT_FALSE(is_json_media_type("application/x-www-form-urlencoded"));
  EXPECT_FALSE(is_json_media_type("multipart/form-data; boundary=x"));
  EXPECT_FALSE(is_json_media_type(""));
}

}  // namespace
}  // namespace sluice::serve
