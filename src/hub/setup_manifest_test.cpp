// The stream-mode progress file (.partial/<shard>.sparse.json): what it
// says is done counts only for the same download, and a damaged file means
// starting over, never an exception or a run count past the runs.
#include "hub/setup_manifest.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

const std::string kSha(64, 'a');

TEST(StreamProgress, RoundTripsAndBindsToTheDownload) {
  const std::string text = stream_progress_json(4096, kSha, 2);
  EXPECT_EQ(read_stream_progress(text, 4096, kSha, 5), 2u);
  EXPECT_EQ(read_stream_progress(text, 4096, kSha, 1), 1u);  // never more than the runs
  EXPECT_EQ(read_stream_progress(text, 4097, kSha, 5), 0u);  // another size
  EXPECT_EQ(read_stream_progress(text, 4096, std::string(64, 'b'), 5), 0u);  // another header
}

TEST(StreamProgress, DamagedFilesStartOver) {
  const std::string sha = "\"" + kSha + "\"";
  for (const std::string& text : {
           std::string(""), std::string("[]"), std::string("{\"size\":4096"),
           "{\"size\":4096,\"header_sha256\":" + sha + ",\"runs_done\":-1}",
           "{\"size\":4096,\"header_sha256\":" + sha + ",\"runs_done\":\"2\"}",
           "{\"size\":4096,\"header_sha256\":" + sha + ",\"runs_done\":1.5}",
           "{\"size\":\"4096\",\"header_sha256\":" + sha + ",\"runs_done\":2}",
           std::string("{\"size\":4096,\"header_sha256\":5,\"runs_done\":2}"),
           std::string("{\"size\":-4096,\"header_sha256\":null,\"runs_done\":2}"),
       }) {
    size_t done = 99;
    EXPECT_NO_THROW(done = read_stream_progress(text, 4096, kSha, 5)) << text;
    EXPECT_EQ(done, 0u) << text;
  }
}

}  // namespace
}  // namespace sluice
