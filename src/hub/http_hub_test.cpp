#include "hub/http_hub.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sluice
