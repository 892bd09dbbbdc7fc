// checkpoint/safetensors.h — strict reader of one safetensors shard's header.
//
// Layout: u64 little-endian header length N, N bytes of JSON, then the data.
// Each tensor entry gives dtype, shape and [begin, end) offsets into the data.
// Everything is checked before any byte is trusted: header length against the
// file size, the JSON, known dtypes, shape x dtype size = byte length, offsets
// inside the file, and no two tensors overlapping.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_span.h"

namespace sluice {

enum class DType { BF16, F16, F32, F64, U8, I8, I16, I32, I64, BOOL };

const char* dtype_name(DType t);
size_t dtype_size(DType t);
// Parses a safetensors dtype code ("BF16", "U8", ...). Returns false if unknown.
bool parse_dtype(std::string_view code, DType* out);

struct TensorInfo {
  std::string name;            // as stored in the shard (with any "language_model." prefix)
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  int shard = -1;              // index into the checkpoint's shard list
  uint64_t offset = 0;         // absolute byte offset in the shard file
  uint64_t nbytes = 0;

  int64_t numel() const;
  FileSpan span() const { return {shard, offset, nbytes}; }
};

struct ShardHeader {
  std::string path;
  uint64_t file_size = 0;
  uint64_t data_start = 0;  // 8 + header length
  std::vector<TensorInfo> tensors;  // in header order; shard = -1 until assigned
};

// Validates a header given its JSON text and the size of the file it came from.
ShardHeader parse_safetensors_header(std::string_view json_text, uint64_t file_size,
                                     const std::string& path);
// Reads and validates the header of the shard at `path`.
ShardHeader read_safetensors_header(const std::string& path);

// The largest header sluice accepts (safetensors' own limit is 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

}  // namespace sluice
