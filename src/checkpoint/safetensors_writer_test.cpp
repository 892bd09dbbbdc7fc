#include "checkpoint/safetensors_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/atomic_file.h"
#include "base/disk_full_test_util.h"
#include "base/error.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("sluice-writer-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t read_u64(const std::string& s) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | uint8_t(s[size_t(i)]);
  return v;
}

std::vector<std::string> dir_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TensorData held(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  TensorData t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes = std::move(bytes);
  return t;
}

// Byte i of a streamed test tensor.
uint8_t pattern(uint64_t i) { return uint8_t((i * 131 + 7) ^ (i >> 9)); }

TEST(SafetensorsWriter, HeaderSortedDataInCallerOrder) {
  TempDir dir;
  std::vector<TensorData> ts;
  ts.push_back(held("c.u8", DType::U8, {5}, {1, 2, 3, 4, 5}));
  std::vector<uint8_t> a(24);
  for (size_t i = 0; i < a.size(); i++) a[i] = uint8_t(100 + i);
  ts.push_back(held("a.f32", DType::F32, {2, 3}, a));
  TensorData b;
  b.name = "b.bf16";
  b.dtype = DType::BF16;
  b.shape = {3};
  b.fill = [](std::span<uint8_t> out, uint64_t off) {
    for (size_t i = 0; i < out.size(); i++) out[i] = pattern(off + i);
  };
  ts.push_back(b);

  std::string path = dir / "x.safetensors";
  write_safetensors(path, ts);
  std::string file = read_all(path);
  uint64_t n = read_u64(file);
  ASSERT_LE(8 + n, file.size());
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string text = file.substr(8, n);
  // Names in sorted order with __metadata__ first, padding is trailing spaces.
  EXPECT_EQ(text.find("{\"__metadata__\":{\"format\":\"pt\"},\"a.f32\":"), 0u) << text;
  EXPECT_LT(text.find("\"a.f32\""), text.find("\"b.bf16\""));
  EXPECT_LT(text.find("\"b.bf16\""), text.find("\"c.u8\""));
  size_t last = text.find_last_not_of(' ');
  EXPECT_EQ(text[last], '}');
  auto h = nlohmann::json::parse(text);
  EXPECT_EQ(h["c.u8"]["data_offsets"], nlohmann::json({0, 5}));
  EXPECT_EQ(h["a.f32"]["data_offsets"], nlohmann::json({5, 29}));
  EXPECT_EQ(h["b.bf16"]["data_offsets"], nlohmann::json({29, 35}));
  EXPECT_EQ(h["a.f32"]["dtype"], "F32");
  EXPECT_EQ(h["a.f32"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(h["b.bf16"]["dtype"], "BF16");
  ASSERT_EQ(file.size(), 8 + n + 35);
  const uint8_t* data = reinterpret_cast<const uint8_t*>(file.data()) + 8 + n;
  for (int i = 0; i < 5; i++) EXPECT_EQ(data[i], i + 1);
  for (int i = 0; i < 24; i++) EXPECT_EQ(data[5 + i], 100 + i);
  for (int i = 0; i < 6; i++) EXPECT_EQ(data[29 + i], pattern(uint64_t(i)));
  // Only the final file remains: the temporary was renamed.
  EXPECT_EQ(dir_entries(dir.path), std::vector<std::string>{"x.safetensors"});
}

TEST(SafetensorsWriter, LayoutMatchesWrittenFile) {
  std::vector<TensorData> ts;
  ts.push_back(held("z", DType::I32, {2, 2}, std::vector<uint8_t>(16, 9)));
  ts.push_back(held("y", DType::U8, {}, {42}));  // a scalar: numel 1
  SafetensorsLayout lay = layout_safetensors(ts);
  EXPECT_EQ(lay.begin, (std::vector<uint64_t>{0, 16}));
  EXPECT_EQ(lay.data_size, 17u);
  EXPECT_EQ(lay.data_start, 8 + lay.header.size());
  TempDir dir;
  write_safetensors(dir / "s.safetensors", ts, lay);
  EXPECT_EQ(fs::file_size(dir.path / "s.safetensors"), lay.file_size());
  auto h = nlohmann::json::parse(lay.header);
  EXPECT_EQ(h["y"]["shape"], nlohmann::json::array());

  SafetensorsLayout bare = layout_safetensors(ts, {});
  EXPECT_FALSE(nlohmann::json::parse(bare.header).contains("__metadata__"));
}

TEST(SafetensorsWriter, StreamsInChunksAtAlignedOffsets) {
  TempDir dir;
  const uint64_t size = 3 * kFillChunk + 123;
  std::vector<std::pair<uint64_t, size_t>> calls;
  TensorData t;
  t.name = "big";
  t.dtype = DType::U8;
  t.shape = {int64_t(size)};
  t.fill = [&](std::span<uint8_t> out, uint64_t off) {
    calls.push_back({off, out.size()});
    for (size_t i = 0; i < out.size(); i++) out[i] = pattern(off + i);
  };
  // A 3-byte tensor first, so the big one starts at an odd file position.
  std::vector<TensorData> ts{held("a", DType::U8, {3}, {7, 7, 7}), t};
  write_safetensors(dir / "big.safetensors", ts);
  ASSERT_EQ(calls.size(), 4u);
  for (size_t k = 0; k < 4; k++) {
    EXPECT_EQ(calls[k].first, k * kFillChunk);
    EXPECT_EQ(calls[k].second, k < 3 ? kFillChunk : 123u);
  }
  std::string file = read_all(dir / "big.safetensors");
  uint64_t start = 8 + read_u64(file) + 3;
  ASSERT_EQ(file.size(), start + size);
  for (uint64_t i = 0; i < size; i += 4099) ASSERT_EQ(uint8_t(file[start + i]), pattern(i)) << i;
  EXPECT_EQ(uint8_t(file[start + size - 1]), pattern(size - 1));
}

// O_DIRECT writes whole 4 KiB blocks and carries the ragged rest over; the
// file must come out byte-identical to a buffered write.
TEST(SafetensorsWriter, DirectAndBufferedWritesAgree) {
  TempDir dir;
  auto streamed = [](std::string name, uint64_t size, uint64_t salt) {
    TensorData t;
    t.name = std::move(name);
    t.dtype = DType::U8;
    t.shape = {int64_t(size)};
    t.fill = [salt](std::span<uint8_t> out, uint64_t off) {
      for (size_t i = 0; i < out.size(); i++) out[i] = pattern(off + i + salt);
    };
    return t;
  };
  std::vector<TensorData> ts{held("a", DType::U8, {3}, {1, 2, 3}), streamed("b", 20 * kFillChunk + 123, 5),
                             held("c", DType::U8, {2}, {9, 9}), streamed("d", 7 * kFillChunk + 5, 77)};
  SafetensorsLayout lay = layout_safetensors(ts);
  write_safetensors(dir / "direct.safetensors", ts, lay, 0);
  write_safetensors(dir / "buffered.safetensors", ts, lay, ~0ull);
  std::string a = read_all(dir / "direct.safetensors"), b = read_all(dir / "buffered.safetensors");
  EXPECT_EQ(a.size(), lay.file_size());
  EXPECT_TRUE(a == b);
  EXPECT_EQ(dir_entries(dir.path), (std::vector<std::string>{"buffered.safetensors", "direct.safetensors"}));
}

TEST(SafetensorsWriter, RejectsBadTensorLists) {
  std::vector<TensorData> wrong_size{held("w", DType::F32, {2}, {1, 2, 3})};
  EXPECT_THROW(layout_safetensors(wrong_size), Error);
  std::vector<TensorData> dup{held("d", DType::U8, {1}, {1}), held("d", DType::U8, {1}, {2})};
  EXPECT_THROW(layout_safetensors(dup), Error);
  std::vector<TensorData> neg{held("n", DType::U8, {-1}, {})};
  EXPECT_THROW(layout_safetensors(neg), Error);
  std::vector<TensorData> meta{held("__metadata__", DType::U8, {1}, {1})};
  EXPECT_THROW(layout_safetensors(meta), Error);
}

TEST(SafetensorsWriter, FailedWriteLeavesNothingBehind) {
  TempDir dir;
  TensorData t;
  t.name = "boom";
  t.dtype = DType::U8;
  t.shape = {int64_t(2 * kFillChunk)};
  t.fill = [](std::span<uint8_t> out, uint64_t off) {
    if (off > 0) throw Error("generator failed");
    std::fill(out.begin(), out.end(), uint8_t(1));
  };
  std::vector<TensorData> ts{t};
  EXPECT_THROW(write_safetensors(dir / "boom.safetensors", ts), Error);
  EXPECT_TRUE(dir_entries(dir.path).empty());
  // A directory that does not exist is an error naming the file.
  try {
    write_safetensors(dir / "missing/x.safetensors", ts);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

// A full disk midway (direct and buffered): the old shard stays as it was,
// no temp file is left, and the error names the file.
TEST(SafetensorsWriter, AFullDiskMidwayLeavesTheOldShard) {
  TempDir dir;
  const std::string path = dir / "model.safetensors";
  std::vector<TensorData> old{held("a", DType::U8, {3}, {1, 2, 3})};
  write_safetensors(path, old);
  const std::string before = read_all(path);
  TensorData big;
  big.name = "big";
  big.dtype = DType::U8;
  big.shape = {int64_t(4 * kFillChunk)};
  big.fill = [](std::span<uint8_t> out, uint64_t off) {
    for (size_t i = 0; i < out.size(); i++) out[i] = pattern(off + i);
  };
  std::vector<TensorData> ts{big};
  for (uint64_t direct_from : {uint64_t(0), ~uint64_t(0)}) {
    testing::DiskFullAfter full(kFillChunk);
    try {
      write_safetensors(path, ts, layout_safetensors(ts), direct_from);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(read_all(path), before);
  EXPECT_EQ(dir_entries(dir.path), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsWriter, SmallFilesAndIndex) {
  TempDir dir;
  write_file_atomic(dir / "a.txt", "hello\n");
  EXPECT_EQ(read_all(dir / "a.txt"), "hello\n");
  write_file_atomic(dir / "a.txt", "again");  // replaces
  EXPECT_EQ(read_all(dir / "a.txt"), "again");

  auto index = make_shard_index({{"t1", "model-00001-of-00002.safetensors"}, {"t2", "model-00002-of-00002.safetensors"}},
                                1234);
  write_file_atomic(dir / "model.safetensors.index.json", index.dump(2) + "\n");
  std::string text = read_all(dir / "model.safetensors.index.json");
  EXPECT_EQ(text.back(), '\n');
  auto back = nlohmann::json::parse(text);
  EXPECT_EQ(back["metadata"]["total_size"], 1234);
  EXPECT_EQ(back["weight_map"]["t2"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(back["weight_map"].size(), 2u);
  EXPECT_EQ(dir_entries(dir.path), (std::vector<std::string>{"a.txt", "model.safetensors.index.json"}));
}

TEST(SafetensorsWriter, FreeDiskBytesOfNotYetCreatedPath) {
  TempDir dir;
  EXPECT_GT(free_disk_bytes(dir / "not/yet/there"), 0u);
}

}  // namespace
}  // namespace sluice
