// io/depth_profile: choosing a depth from measured rates, saving it per device
// and reading it back; a bad profile never stops anything.
#include "io/depth_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/test_util.h"

namespace sluice {
namespace {

using testing::ScratchDir;

TEST(DepthProfile, LeavesTheDefaultOnlyForADepthThatBeatsItInEveryRound) {
  // One round cannot tell noise from a rate: 4 looked 38 % faster once on a
  // disk where it measured slower in the engine; more rounds undo that.
  EXPECT_EQ(choose_depth({{1, {0.9}}, {4, {1.3}}, {16, {1.0}}, {32, {1.1}}}), 4);
  EXPECT_EQ(choose_depth({{1, {0.9, 0.8, 0.9}}, {4, {1.3, 0.9, 1.0}}, {16, {0.94, 1.2, 1.0}}, {32, {1.0, 1.1, 0.9}}}),
            16);
  // NVMe-like: deeper wins in every round.
  EXPECT_EQ(choose_depth({{1, {0.5, 0.6}}, {4, {2.0, 1.9}}, {16, {2.05, 2.1}}, {64, {4.0, 3.8}}}), 64);
  // Two depths beat the default; their medians are within 5 %: the shallower.
  EXPECT_EQ(choose_depth({{16, {1.0, 1.1}}, {32, {1.96, 2.0, 2.04}}, {64, {2.0, 2.05, 2.1}}}), 32);
  // A rate-limited disk: shallower is faster every round.
  EXPECT_EQ(choose_depth({{4, {1.5, 1.6, 1.55}}, {16, {1.2, 1.3, 1.25}}}), 4);
  // Without the default among the depths: the shallowest near the best median.
  EXPECT_EQ(choose_depth({{4, {1.96}}, {32, {2.0}}}), 4);
  EXPECT_EQ(choose_depth({}), 0);
  EXPECT_EQ(choose_depth({{16, {}}}), 0);
}

TEST(DepthProfile, SavedPerDeviceAndReadBack) {
  ScratchDir dir;
  const std::string file = dir.write("shard.bin", testing::pattern_bytes(4096, 1));
  const std::string path = dir.path + "/sub/io-depth.json";
  EXPECT_EQ(saved_queue_depth(file, path), 0);  // nothing saved yet
  const std::string dev = device_of(file);
  ASSERT_FALSE(dev.empty());
  EXPECT_EQ(save_depth_profile(path, "1:99", {{8, {1.0}}}), 8);  // another device's entry stays
  EXPECT_EQ(save_depth_profile(path, dev, {{4, {1.0}}, {16, {2.0, 1.9}}, {32, {2.02, 1.95}}}), 16);
  EXPECT_EQ(saved_queue_depth(file, path), 16);
  EXPECT_EQ(save_depth_profile(path, dev, {{4, {3.0, 2.9}}, {16, {2.0, 2.1}}}), 4);  // re-probed: replaced
  EXPECT_EQ(saved_queue_depth(file, path), 4);
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/sub/.tmp-io-depth.json"));
  for (const char* bad : {"not json", "[1,2]", "{\"devices\": 3}", "{\"devices\": {\"DEV\": {\"queue_depth\": -5}}}",
                          "{\"devices\": {\"DEV\": {\"queue_depth\": \"x\"}}}"}) {
    std::string text = bad;
    if (auto at = text.find("DEV"); at != std::string::npos) text.replace(at, 3, dev);
    std::ofstream(path, std::ios::trunc) << text;
    EXPECT_EQ(saved_queue_depth(file, path), 0) << bad;
  }
  EXPECT_EQ(saved_queue_depth(dir.path + "/missing", path), 0);
  EXPECT_ANY_THROW(save_depth_profile(path, dev, {}));
}

}  // namespace
}  // namespace sluice
