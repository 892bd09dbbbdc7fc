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

TEST(DepthProfile, ChoosesTheShallowestDepthNearTheBestRate) {
  EXPECT_EQ(choose_depth({{1, 0.9}, {4, 1.3}, {16, 1.0}, {32, 1.1}}), 4);
  EXPECT_EQ(choose_depth({{1, 0.5}, {4, 2.0}, {16, 2.05}, {64, 4.0}}), 64);  // NVMe-like: depth pays
  EXPECT_EQ(choose_depth({{4, 1.96}, {16, 2.0}}), 4);                       // within 5 %: shallower
  EXPECT_EQ(choose_depth({}), 0);
}

TEST(DepthProfile, SavedPerDeviceAndReadBack) {
  ScratchDir dir;
  const std::string file = dir.write("shard.bin", testing::pattern_bytes(4096, 1));
  const std::string path = dir.path + "/sub/io-depth.json";
  EXPECT_EQ(saved_queue_depth(file, path), 0);  // nothing saved yet
  const std::string dev = device_of(file);
  ASSERT_FALSE(dev.empty());
  EXPECT_EQ(save_depth_profile(path, "1:99", {{8, 1.0}}), 8);  // another device's entry stays
  EXPECT_EQ(save_depth_profile(path, dev, {{4, 1.0}, {16, 2.0}, {32, 2.02}}), 16);
  EXPECT_EQ(saved_queue_depth(file, path), 16);
  EXPECT_EQ(save_depth_profile(path, dev, {{4, 3.0}, {16, 2.0}}), 4);  // re-probed: replaced
  EXPECT_EQ(saved_queue_depth(file, path), 4);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
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
