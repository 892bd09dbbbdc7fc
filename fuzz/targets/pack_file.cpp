// Spine pack files (pack/pack.h): the header, the trailer, the block indexes
// and the blocks. At start-up the harness writes a small checkpoint (one
// shard: a 2-block matrix, a 1-block one, a 1-row vector that no pack holds)
// and packs it with write_pack, lossless and int8. An input is an edit script
// over one of those packs, so the seeds never go stale when the format
// changes:
//   byte 0: bit 0 int8 (else lossless), bit 1 reseal (after the edits, when the
//           file still ends in a trailer "<u64 at><u64 bytes><u32 crc>SLPK",
//           recompute its length and crc32 over the header, so edits to the
//           JSON get past the checksum)
//   then edits, each: op byte (bits 0-1: 0 xor a byte, 1 overwrite, 2 insert,
//           3 erase; bit 2: the offset counts from the end), u32 offset (mod
//           the size + 1), then op 0: 1 byte; op 1/2: 1 length byte and that
//           many bytes; op 3: 2 length bytes.
// The result is opened with open_pack, and when it opens every block is read:
// verify_pack (checksums, decode, sha256 against the source), then
// decode_blocks without the checksum (a decoder must stay inside the block
// whatever the bytes say) or check_int8_blocks.
#include <stdlib.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors_writer.h"
#include "fuzz/fuzz_util.h"
#include "kernels/threads.h"
#include "pack/pack.h"

namespace {

using namespace sluice;

// A bf16 matrix of smooth-ish values (few exponents, like trained weights).
TensorData matrix(const std::string& name, int64_t rows, int64_t cols) {
  TensorData t{.name = name, .dtype = DType::BF16, .shape = {rows, cols}};
  t.bytes.resize(size_t(rows * cols) * 2);
  uint32_t x = 12345;
  for (size_t i = 0; i < t.bytes.size(); i += 2) {
    x = x * 1103515245u + 12345u;
    const uint16_t v = uint16_t(0x3c00 + ((x >> 16) & 0x3ff)) ^ uint16_t((x >> 5) & 0x8000);
    std::memcpy(&t.bytes[i], &v, 2);
  }
  return t;
}

struct World {
  std::string dir;
  Checkpoint ck;
  std::string base[2];  // the lossless and the int8 pack's bytes
};

const World& world() {
  static const World w = [] {
    World w;
    char tmpl[] = "/tmp/sluice-fuzz-pack-XXXXXX";
    if (!mkdtemp(tmpl)) __builtin_trap();
    w.dir = tmpl;
    kernels::set_num_threads(1);
    std::vector<TensorData> ts = {matrix("model.layers.0.mlp.up_proj.weight", 4100, 16),
                                  matrix("model.layers.0.self_attn.o_proj.weight", 3, 8),
                                  matrix("model.norm.weight", 1, 32)};
    const std::string shard = w.dir + "/model.safetensors";
    write_safetensors(shard, ts);
    ShardHeader h = read_safetensors_header(shard);
    w.ck.dir = w.dir;
    w.ck.shard_paths = {shard};
    w.ck.shard_sizes = {h.file_size};
    for (TensorInfo t : h.tensors) {
      t.shard = 0;
      w.ck.tensors[t.name] = t;
    }
    for (int i = 0; i < 2; i++) {
      PackOptions opt{.format = i ? SpineFormat::int8 : SpineFormat::lossless, .out = w.dir + "/base.pack"};
      const std::string path = write_pack(w.ck, opt).path;
      std::ifstream f(path, std::ios::binary);
      w.base[i].assign(std::istreambuf_iterator<char>(f), {});
      if (w.base[i].empty() || !verify_pack(path, w.ck).empty()) __builtin_trap();
    }
    return w;
  }();
  return w;
}

struct Reader {
  const uint8_t* p;
  size_t n;
  bool take(void* out, size_t k) {
    if (k > n) return false;
    std::memcpy(out, p, k);
    p += k, n -= k;
    return true;
  }
};

void apply_edits(std::string& s, Reader in) {
  uint8_t op;
  uint32_t off;
  while (in.take(&op, 1) && in.take(&off, 4)) {
    size_t at = off % (s.size() + 1);
    if (op & 4) at = s.size() - at;
    uint8_t len8 = 0;
    uint16_t len16 = 0;
    switch (op & 3) {
      case 0:
        if (!in.take(&len8, 1)) return;
        if (at < s.size()) s[at] = char(s[at] ^ len8);
        break;
      case 1:
      case 2: {
        if (!in.take(&len8, 1)) return;
        std::string bytes(std::min<size_t>(len8, in.n), '\0');
        in.take(bytes.data(), bytes.size());
        if ((op & 3) == 2) s.insert(at, bytes);
        else s.replace(at, std::min(bytes.size(), s.size() - at), bytes);
        break;
      }
      default:
        if (!in.take(&len16, 2)) return;
        s.erase(at, len16);
        break;
    }
  }
}

// Rewrites the trailer's header length and crc32 when the file still ends in one.
void reseal(std::string& s) {
  if (s.size() < 24 || s.compare(s.size() - 4, 4, "SLPK") != 0) return;
  uint64_t at;
  std::memcpy(&at, &s[s.size() - 24], 8);
  if (at > s.size() - 24) return;
  const uint64_t bytes = s.size() - 24 - at;
  const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(s.data() + at), uInt(bytes)));
  std::memcpy(&s[s.size() - 16], &bytes, 8);
  std::memcpy(&s[s.size() - 8], &crc, 4);
}

// Every block of every tensor, read the way the spine reads them.
void read_blocks(const Pack& p) {
  std::vector<uint8_t> bytes;
  std::vector<uint16_t> out;
  for (const PackedTensor& t : p.tensors) {
    bytes.resize(size_t(t.index.back()));
    read_exact(p.path, bytes.data(), bytes.size(), t.data_at);
    if (p.format == SpineFormat::int8) {
      check_int8_blocks(p, t, 0, t.blocks(), bytes.data());
      continue;
    }
    out.assign(size_t(t.rows * t.cols), 0);
    decode_blocks(p, t, 0, t.blocks(), bytes.data(), out.data(), false);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const World& w = world();
  if (size == 0) return 0;
  std::string file = w.base[data[0] & 1];
  apply_edits(file, Reader{data + 1, size - 1});
  if (data[0] & 2) reseal(file);
  sluice::fuzz::MemFile m(file);
  try {
    const Pack p = open_pack(m.path, w.ck);
    (void)verify_pack(m.path, w.ck);
    read_blocks(p);
  } catch (const sluice::Error&) {
  }
  return 0;
}
