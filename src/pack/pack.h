// pack/pack.h — a packed copy of a checkpoint's spine, beside its shards.
//
// Why a folder of its own: a pack is derived from a checkpoint (checkpoint/)
// with the codec (kernels/bf16_codec.h) and read by the spine (k3/spine.h);
// it sits between them in the data flow, and owns one file format.
//
// `spine.lossless.pack` holds every spine matrix (each BF16 2-D tensor except
// the embedding, whose rows the engine reads one token at a time) as
// compressed blocks of whole rows (codec blocks, each with its crc32).
// `spine.int8.pack` holds the same matrices but the MoE routers and MLA's
// kv_b (both read exact from the shards: the routers pick experts, kv_b is
// indexed, not multiplied) as int8 rows (pack/int8.h); its blocks are plain
// int8 rows, their crc32s in a table after the index. File:
//   "SLPACK1\0", zeros to 4096
//   per tensor: u64 index[blocks + 1] (block b is data[index[b], index[b+1])),
//               [int8: u32 crc32[blocks]], then the blocks
//   JSON header (below), then the trailer: u64 header_at, u64 header_bytes,
//   u32 crc32(header), "SLPK"
// The JSON binds the pack to its checkpoint: the shard files' names, sizes
// and modification times (ns), and per tensor its name, shape, shard, offset, byte length and the
// sha256 of those source bytes; plus where its index and blocks lie, the
// index's crc32, and the whole file's size (a truncated pack is refused).
// Opening checks the binding against the checkpoint's headers, and the shard
// files' sizes and times (one stat each; no weight byte is read): a pack of
// another revision with the same layout, or one made before a shard was
// edited, is refused as stale; verify_pack() also rehashes the sources and decodes
// every block (bit-exact against the source sha256).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace sluice {

enum class SpineFormat { bf16, lossless, int8 };
const char* spine_format_name(SpineFormat f);
// "bf16" | "lossless" | "int8"; throws naming the option otherwise.
SpineFormat parse_spine_format(const std::string& s);

// The pack file of `format` for checkpoint DIR (lossless: DIR/spine.lossless.pack).
std::string pack_path(const std::string& dir, SpineFormat format);

struct PackedTensor {
  std::string name;
  int64_t rows = 0, cols = 0;
  int shard = -1;              // source: the checkpoint's shard index
  uint64_t offset = 0, nbytes = 0;
  std::string sha256;          // of the source bytes
  int64_t rows_per_block = 0;
  uint64_t index_at = 0;       // file offset of the block index
  uint64_t data_at = 0;        // file offset of block 0
  std::vector<uint64_t> index; // [blocks + 1], relative to data_at (read at open)
  std::vector<uint32_t> block_crc;  // int8 packs: crc32 of each block (lossless blocks carry their own)
  int64_t blocks() const { return int64_t(index.size()) - 1; }
  int64_t block_rows(int64_t b) const { return std::min(rows_per_block, rows - b * rows_per_block); }
};

struct Pack {
  std::string path;
  SpineFormat format = SpineFormat::lossless;
  uint64_t file_bytes = 0;
  uint64_t packed_bytes = 0, source_bytes = 0;  // blocks, and the bf16 bytes they hold
  std::vector<PackedTensor> tensors;
  // The tensor whose source is (shard, offset), or nullptr.
  const PackedTensor* find(int shard, uint64_t offset) const;
};

// Rows per codec block for a matrix with `cols` columns (blocks of about 64K values).
int64_t pack_rows_per_block(int64_t cols);

// A pack as write_pack would lay out these bf16 matrices: lossless, each block
// taking `ratio` of its bf16 bytes; int8, each block its exact int8 rows
// (`ratio` unused). The sizes `sluice plan` needs for a checkpoint it has no
// weights or no pack of (`sluice plan --preset k3`). It has no file.
struct PackSource {
  FileSpan span;  // the matrix's bf16 bytes
  int64_t rows = 0, cols = 0;
};
Pack modelled_pack(const std::vector<PackSource>& matrices, SpineFormat format, double ratio);

// Opens the pack at `path` and checks it belongs to `ck` (shard names, sizes
// and modification times, every tensor's place, shape and dtype). Errors name
// the pack file; a stale pack's error says how to rebuild it.
Pack open_pack(const std::string& path, const Checkpoint& ck);

struct PackOptions {
  SpineFormat format = SpineFormat::lossless;
  std::string out;   // the pack file; empty: pack_path(ck.dir, format)
  std::function<void(uint64_t done, uint64_t total)> progress;  // source bytes
};
struct PackResult {
  std::string path;
  bool up_to_date = false;   // a matching pack was already there: nothing written
  std::string replaced;      // why a pack already there was not kept (stale, damaged), or empty
  uint64_t source_bytes = 0, packed_bytes = 0;
};
// Writes the pack (temp file + rename). An existing pack that matches `ck`
// is kept as it is.
PackResult write_pack(const Checkpoint& ck, const PackOptions& opt);

// Every check: binding, index crc32s, every block's crc32, source sha256s,
// and decoded blocks against the source sha256 (bit-exact). Returns problems
// (empty = good), each naming the pack file.
std::vector<std::string> verify_pack(const std::string& path, const Checkpoint& ck);

// int8 packs: checks the crc32 of blocks [first_block, first_block + n) of t,
// whose bytes start at `blocks`; throws naming the pack and the block. On the
// kernel thread pool.
void check_int8_blocks(const Pack& pack, const PackedTensor& t, int64_t first_block, int64_t n, const uint8_t* blocks);

// Reads and decodes rows [first_block, first_block + n) blocks of t from the
// block bytes `blocks` (index[first_block] at blocks[0]) into out; checks each
// block's crc32 when `check` (the first read). On the kernel thread pool.
void decode_blocks(const Pack& pack, const PackedTensor& t, int64_t first_block, int64_t n, const uint8_t* blocks,
                   uint16_t* out, bool check);

}  // namespace sluice
