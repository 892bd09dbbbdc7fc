#include "hub/http_hub.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "hub/http_client.h"

namespace sluice {
namespace {

const std::string kSha(64, 'a');

TEST(HttpHub, ParsesTheRevisionFileList) {
  std::string json = R"({"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[
    {"rfilename":"config.json","size":3033,"blobId":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"},
    {"rfilename":"model-00001-of-00002.safetensors","size":1000,"blobId":"1111111111111111111111111111111111111111",
     "lfs":{"sha256":")" + kSha + R"(","size":1000,"pointerSize":134}},
    {"rfilename":"original/params.json","size":12}]})";
  HubRevision r = parse_hub_revision(json, "api");
  EXPECT_EQ(r.commit, "0123456789abcdef0123456789abcdef01234567");
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.files[0].name, "config.json");
  EXPECT_EQ(r.files[0].size, 3033u);
  EXPECT_EQ(r.files[0].git_blob, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  EXPECT_TRUE(r.files[0].sha256.empty());
  EXPECT_EQ(r.files[1].sha256, kSha);
  EXPECT_TRUE(r.files[1].git_blob.empty());  // an LFS file's blob id is its pointer's
  EXPECT_EQ(r.files[2].name, "original/params.json");
}

TEST(HttpHub, RejectsBadFileLists) {
  auto parse = [](const std::string& siblings) {
    return parse_hub_revision(R"({"siblings":[)" + siblings + "]}", "api");
  };
  EXPECT_THROW(parse_hub_revision("not json", "api"), Error);
  EXPECT_THROW(parse_hub_revision(R"({"id":"x"})", "api"), Error);  // no siblings: ?blobs=true ignored
  EXPECT_THROW(parse(""), Error);                                    // no files
  EXPECT_THROW(parse(R"({"rfilename":"a"})"), Error);                // no size
  EXPECT_THROW(parse(R"({"rfilename":"../etc/passwd","size":1})"), Error);
  EXPECT_THROW(parse(R"({"rfilename":"/abs","size":1})"), Error);
  EXPECT_THROW(parse(R"({"rfilename":"a//b","size":1})"), Error);
  EXPECT_THROW(parse(R"({"rfilename":"a/./b","size":1})"), Error);
  EXPECT_THROW(parse(R"({"rfilename":"a","size":1},{"rfilename":"a","size":1})"), Error);
  EXPECT_THROW(parse(R"({"rfilename":"a","size":1,"lfs":{"sha256":"xyz","size":1}})"), Error);
  EXPECT_THROW(parse(R"({"rfilename":"a","size":2,"lfs":{"sha256":")" + kSha + R"(","size":1}})"), Error);
  EXPECT_NO_THROW(parse(R"({"rfilename":"a","size":1,"lfs":{"sha256":")" + kSha + R"(","size":1}})"));
  // Names that would overwrite sluice's own bookkeeping in the model directory.
  for (const char* name : {".sluice-setup.json", ".sluice-stream.json", ".partial/config.json.part",
                           ".span-cache/l1-e2.x", ".sluice-anything"})
    EXPECT_THROW(parse(std::string(R"({"rfilename":")") + name + R"(","size":1})"), Error) << name;
  EXPECT_NO_THROW(parse(R"({"rfilename":"sub/.partial","size":1})"));  // only the top level is ours
}

// 160,000 files used to take 70 s (a quadratic duplicate check).
TEST(HttpHub, LongFileListsParseInLinearishTime) {
  std::string siblings;
  for (int i = 0; i < 160000; i++)
    siblings += std::string(i ? "," : "") + R"({"rfilename":"f)" + std::to_string(i) + R"(","size":1})";
  const auto t0 = std::chrono::steady_clock::now();
  HubRevision r = parse_hub_revision(R"({"siblings":[)" + siblings + "]}", "api");
  EXPECT_EQ(r.files.size(), 160000u);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST(HttpHub, SafePaths) {
  EXPECT_TRUE(is_safe_relative_path("model-00001-of-00096.safetensors"));
  EXPECT_TRUE(is_safe_relative_path("original/tokenizer.model"));
  EXPECT_FALSE(is_safe_relative_path(""));
  EXPECT_FALSE(is_safe_relative_path(".."));
  EXPECT_FALSE(is_safe_relative_path("a/../../b"));
  EXPECT_FALSE(is_safe_relative_path("a/"));
  EXPECT_FALSE(is_safe_relative_path("a\\b"));
  EXPECT_FALSE(is_safe_relative_path(std::string("a\nb")));
}

TEST(HttpHub, Urls) {
  HubRepo r{"https://huggingface.co", "moonshotai/Kimi-K3", "main"};
  EXPECT_EQ(hub_api_url(r), "https://huggingface.co/api/models/moonshotai/Kimi-K3/revision/main?blobs=true");
  EXPECT_EQ(hub_file_url(r, "main", "config.json"), "https://huggingface.co/moonshotai/Kimi-K3/resolve/main/config.json");
  r.revision = "refs/pr/1";
  EXPECT_EQ(hub_api_url(r), "https://huggingface.co/api/models/moonshotai/Kimi-K3/revision/refs%2Fpr%2F1?blobs=true");
  EXPECT_EQ(hub_file_url(r, r.revision, "original/a b.json"),
            "https://huggingface.co/moonshotai/Kimi-K3/resolve/refs%2Fpr%2F1/original/a%20b.json");
  EXPECT_NO_THROW(check_repo_id("moonshotai/Kimi-K3"));
  EXPECT_THROW(check_repo_id("Kimi-K3"), Error);
  EXPECT_THROW(check_repo_id("a/b/c"), Error);
  EXPECT_THROW(check_repo_id("../b"), Error);
}

TEST(HttpClient, ContentRange) {
  uint64_t first, last, total;
  ASSERT_TRUE(parse_content_range("bytes 0-7/1755920", &first, &last, &total));
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(last, 7u);
  EXPECT_EQ(total, 1755920u);
  ASSERT_TRUE(parse_content_range("bytes 100-199/*", &first, &last, &total));
  EXPECT_EQ(total, ~uint64_t(0));
  EXPECT_FALSE(parse_content_range("bytes */1000", &first, &last, &total));
  EXPECT_FALSE(parse_content_range("bytes 9-3/10", &first, &last, &total));
  EXPECT_FALSE(parse_content_range("items 0-1/2", &first, &last, &total));
  EXPECT_FALSE(parse_content_range("bytes 0-99999999999999999999/1", &first, &last, &total));
}

// A hub that trickles a byte every few hundred ms never trips the "no data"
// stall check; the low-speed limit ends each attempt, and a trickle counts as
// a failed attempt, so the transfer gives up instead of running forever.
TEST(HttpClient, TrickleIsTimedOut) {
  httplib::Server srv;
  std::atomic<bool> stop{false};
  srv.Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/octet-stream", [&](size_t, httplib::DataSink& sink) {
      for (int i = 0; i < 200 && !stop; i++) {
        if (!sink.write("x", 1)) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      sink.done();
      return true;
    });
  });
  const int port = srv.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread th([&] { srv.listen_after_bind(); });
  HttpOptions o;
  o.low_speed_bytes_per_s = 100;
  o.low_speed_window_s = 1;
  o.retries = 1;
  o.backoff_ms = 10;
  HttpClient c(o);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.get("http://127.0.0.1:" + std::to_string(port) + "/slow");
    ADD_FAILURE() << "a trickle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slower than"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0);
  stop = true;
  srv.stop();
  th.join();
}

// Issue 38: a server that sends a few hundred bytes per connection, slowly,
// and then drops it. Each attempt makes progress, so the "attempts in a row
// that delivered nothing" budget never ran out and the file crept in at a few
// hundred bytes a second for hours; an attempt that averaged below the
// minimum rate (its wait included) now counts as a failure.
TEST(HttpClient, TrickleAcrossDroppedConnectionsGivesUp) {
  static constexpr size_t kTotal = 40000, kPerConnection = 300;
  httplib::Server srv;
  std::atomic<bool> stop{false};
  srv.Get("/drip", [&](const httplib::Request&, httplib::Response& res) {
    auto sent = std::make_shared<size_t>(0);
    res.set_content_provider(kTotal, "application/octet-stream",
                             [&stop, sent](size_t, size_t length, httplib::DataSink& sink) {
                               if (*sent >= kPerConnection || stop) return false;  // drop the connection
                               std::this_thread::sleep_for(std::chrono::milliseconds(500));
                               const std::string chunk(std::min(length, kPerConnection), 'y');
                               *sent += chunk.size();
                               return sink.write(chunk.data(), chunk.size());
                             });
  });
  const int port = srv.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread th([&] { srv.listen_after_bind(); });
  HttpOptions o;
  o.low_speed_bytes_per_s = 1024;  // each connection gives ~600 bytes/s
  o.low_speed_window_s = 60;
  o.retries = 2;
  o.backoff_ms = 10;
  HttpClient c(o);
  uint64_t got = 0;
  try {
    c.download("http://127.0.0.1:" + std::to_string(port) + "/drip", 0, kTotal,
               [&](uint64_t, const uint8_t*, size_t n) { got += n; }, [&] { got = 0; });
    ADD_FAILURE() << "a trickle was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("giving up after 3 failed attempts in a row"), std::string::npos) << msg;
    EXPECT_NE(msg.find("below the minimum of 1024 bytes/s"), std::string::npos) << msg;
  }
  EXPECT_LE(got, 3 * kPerConnection);
  stop = true;
  srv.stop();
  th.join();
}

}  // namespace
}  // namespace sluice
