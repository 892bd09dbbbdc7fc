// checkpoint/safetensors_writer.h — writes checkpoint files: safetensors shards,
// model.safetensors.index.json and small text/JSON files.
//
// A shard is written from a list of tensors in the caller's data order. A
// tensor's bytes are either held (small tensors) or streamed by a fill
// callback in chunks, so a multi-GB shard never sits in memory. The header
// lists tensors in name order (like Python's safetensors), "__metadata__"
// first, and is padded with spaces so the data starts 8-byte aligned.
// Every file goes through base/atomic_file.h (DIR/.tmp-NAME, synced, renamed
// into place when complete): a reader never sees a half-written file under
// its final name.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"

namespace sluice {

// Writes bytes [offset, offset + out.size()) of a tensor into `out`. The writer
// calls it in increasing offset order; every offset is a multiple of
// kFillChunk, every chunk but a tensor's last is kFillChunk bytes long.
using FillFn = std::function<void(std::span<uint8_t> out, uint64_t offset)>;
inline constexpr uint64_t kFillChunk = 1ull << 20;

struct TensorData {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // the data, when `fill` is empty
  FillFn fill;                 // streams the data otherwise

  uint64_t nbytes() const;  // product of shape x dtype size
};

// Where everything lands in a shard file, computed without writing it.
struct SafetensorsLayout {
  std::string header;             // JSON text including its space padding
  uint64_t data_start = 0;        // 8 + header.size(), a multiple of 8
  std::vector<uint64_t> begin;    // data offset of each tensor, in the given order
  uint64_t data_size = 0;
  uint64_t file_size() const { return data_start + data_size; }
};

// Lays tensors out back to back in the given order. `metadata` becomes the
// header's "__metadata__" object (omitted when empty). Throws on duplicate
// names, negative dimensions or held bytes whose size differs from the shape.
SafetensorsLayout layout_safetensors(std::span<const TensorData> tensors,
                                     const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Shards of at least this size are written with O_DIRECT where the file system
// allows it (tmpfs does not: buffered there). It skips the kernel's copy into
// the page cache (8 GB: 0.25 s of system time instead of 7-15 s) and a
// multi-GB model does not push everything else out of that cache.
inline constexpr uint64_t kDirectIoFrom = 64ull << 20;

// Writes the shard to `path` atomically (via .tmp-NAME beside it).
void write_safetensors(const std::string& path, std::span<const TensorData> tensors,
                       const SafetensorsLayout& layout, uint64_t direct_io_from = kDirectIoFrom);
void write_safetensors(const std::string& path, std::span<const TensorData> tensors);

// Small files: write_file_atomic (base/atomic_file.h).

// {"metadata":{"total_size":N},"weight_map":{tensor: shard file}}; total_size is
// the sum of the tensors' data bytes (the Hugging Face convention).
nlohmann::json make_shard_index(const std::map<std::string, std::string>& weight_map, uint64_t total_size);

// Bytes available to an unprivileged writer on the file system holding `path`
// (or its nearest existing parent).
uint64_t free_disk_bytes(const std::string& path);

}  // namespace sluice
