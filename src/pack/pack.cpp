#include "pack/pack.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_io.h"
#include "checkpoint/shard_stamp.h"
#include "kernels/bf16_codec.h"
#include "kernels/threads.h"
#include "pack/int8.h"
#include "hub/sha256.h"

namespace sluice {

namespace {

using json = nlohmann::json;

// The file starts with kMagic and zeros up to kDataStart; it ends with the
// JSON header and then the trailer: u64 header_at, u64 header_bytes,
// u32 crc32(header), "SLPK". (Header last: it is written once every block's
// place is known, in one sequential pass.)
constexpr char kMagic[8] = {'S', 'L', 'P', 'A', 'C', 'K', '1', '\0'};
constexpr uint64_t kDataStart = 4096;
constexpr uint64_t kTrailer = 24;
constexpr uint32_t kTrailerMagic = 0x4b504c53;  // "SLPK"
// 2: the shards' identity (size and modification time) is recorded and
// checked at open. Version 1 packs are refused: they cannot be told from a
// pack of another revision with the same layout.
constexpr int kVersion = 2;
constexpr uint32_t kTargetBlockValues = 1u << 16;
constexpr uint64_t kChunkSource = 64ull << 20;  // source bytes encoded at once

uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(path, "cannot stat");
  return uint64_t(st.st_size);
}

std::string repack_hint(const Checkpoint& ck, SpineFormat f) {
  return std::string("run `sluice pack --model ") + ck.dir + " --spine " + spine_format_name(f) + "`";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What a pack holds: every BF16 2-D tensor but the embedding, in file order.
// int8 leaves out what the engine reads exact from the shards anyway: the
// MoE routers (they pick the experts) and MLA's kv_b (indexed per head).
std::vector<const TensorInfo*> spine_tensors(const Checkpoint& ck, SpineFormat format) {
  std::vector<const TensorInfo*> out;
  for (const auto& [name, t] : ck.tensors) {
    if (t.dtype != DType::BF16 || t.shape.size() != 2 || t.shape[0] <= 1 || name == "model.embed_tokens.weight") continue;
    if (format == SpineFormat::int8 &&
        (ends_with(name, "block_sparse_moe.gate.weight") || ends_with(name, "self_attn.kv_b_proj.weight")))
      continue;
    out.push_back(&t);
  }
  std::sort(out.begin(), out.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return std::tie(a->shard, a->offset) < std::tie(b->shard, b->offset); });
  return out;
}

std::string key_of(const Checkpoint& ck, const TensorInfo& t) {
  for (const auto& [name, info] : ck.tensors)
    if (&info == &t) return name;
  return t.name;
}

}  // namespace

const char* spine_format_name(SpineFormat f) {
  switch (f) {
    case SpineFormat::bf16: return "bf16";
    case SpineFormat::lossless: return "lossless";
    case SpineFormat::int8: return "int8";
  }
  return "?";
}

SpineFormat parse_spine_format(const std::string& s) {
  if (s == "bf16") return SpineFormat::bf16;
  if (s == "lossless") return SpineFormat::lossless;
  if (s == "int8") return SpineFormat::int8;
  fail("--spine", "'" + s + "' is not one of bf16, lossless, int8");
}

std::string pack_path(const std::string& dir, SpineFormat format) {
  return dir + "/spine." + spine_format_name(format) + ".pack";
}

int64_t pack_rows_per_block(int64_t cols) { return std::max<int64_t>(1, int64_t(kTargetBlockValues) / cols); }

Pack modelled_pack(const std::vector<PackSource>& matrices, SpineFormat format, double ratio) {
  if (format == SpineFormat::bf16) fail("modelled pack", "bf16 is the shards, not a pack");
  Pack p;
  p.path = "(modelled pack)";
  p.format = format;
  for (const PackSource& m : matrices) {
    PackedTensor t;
    t.rows = m.rows;
    t.cols = m.cols;
    t.shard = m.span.file;
    t.offset = m.span.offset;
    t.nbytes = m.span.length;
    t.rows_per_block = pack_rows_per_block(m.cols);
    t.data_at = kDataStart + p.packed_bytes;
    t.index.push_back(0);
    for (int64_t b = 0; b * t.rows_per_block < t.rows; b++)
      t.index.push_back(t.index.back() + (format == SpineFormat::int8
                                              ? int8_matrix_bytes64(t.block_rows(b), t.cols)
                                              : uint64_t(std::ceil(double(t.block_rows(b) * t.cols * 2) * ratio))));
    p.packed_bytes += t.index.back();
    p.source_bytes += t.nbytes;
    p.tensors.push_back(std::move(t));
  }
  p.file_bytes = kDataStart + p.packed_bytes;
  return p;
}

const PackedTensor* Pack::find(int shard, uint64_t offset) const {
  for (const PackedTensor& t : tensors)
    if (t.shard == shard && t.offset == offset) return &t;
  return nullptr;
}

Pack open_pack(const std::string& path, const Checkpoint& ck) {
  Pack p;
  p.path = path;
  p.file_bytes = file_size(path);
  if (p.file_bytes < kDataStart + kTrailer) fail(path, "pack is truncated (" + std::to_string(p.file_bytes) + " bytes)");
  char magic[8];
  read_exact(path, magic, 8, 0);
  if (std::memcmp(magic, kMagic, 8) != 0) fail(path, "not a sluice pack (bad magic)");
  uint8_t tr[kTrailer];
  read_exact(path, tr, kTrailer, p.file_bytes - kTrailer);
  uint64_t header_at, header_bytes;
  uint32_t header_crc, tmagic;
  std::memcpy(&header_at, tr, 8);
  std::memcpy(&header_bytes, tr + 8, 8);
  std::memcpy(&header_crc, tr + 16, 4);
  std::memcpy(&tmagic, tr + 20, 4);
  if (tmagic != kTrailerMagic || header_at < kDataStart || header_bytes > (64ull << 20) ||
      header_at + header_bytes + kTrailer != p.file_bytes)
    fail(path, "pack is truncated or incomplete (no valid trailer); run `sluice pack` again");
  std::string text(header_bytes, '\0');
  read_exact(path, text.data(), header_bytes, header_at);
  if (uint32_t(crc32(0, reinterpret_cast<const Bytef*>(text.data()), uInt(text.size()))) != header_crc)
    fail(path, "pack header fails its checksum");
  json h;
  try {
    h = json::parse(text);
    if (h.at("format") != "sluice-pack") fail(path, "unsupported pack format");
    p.format = parse_spine_format(h.at("spine").get<std::string>());
    if (h.at("version") == 1)
      fail(path, "pack format 1 is not bound to the shards it was made from; rebuild it: " + repack_hint(ck, p.format));
    if (h.at("version") != kVersion) fail(path, "unsupported pack version " + h.at("version").dump());
    const json& shards = h.at("shards");
    if (shards.size() != ck.shard_paths.size()) fail(path, "pack was made from another checkpoint (shard count differs)");
    for (size_t i = 0; i < shards.size(); i++) {
      if (shards[i].at("file").get<std::string>() != base_name(ck.shard_paths[i]) ||
          shards[i].at("bytes").get<uint64_t>() != ck.shard_sizes[i])
        fail(path, "pack was made from another checkpoint (" + base_name(ck.shard_paths[i]) +
                       " differs in name or size); run `sluice pack` again");
    }
    std::vector<int64_t> mtimes;  // compared once the layout is known to match
    for (const json& sh : shards) mtimes.push_back(sh.at("mtime_ns").get<int64_t>());
    for (const json& j : h.at("tensors")) {
      PackedTensor t;
      t.name = j.at("name").get<std::string>();
      t.rows = j.at("shape").at(0).get<int64_t>();
      t.cols = j.at("shape").at(1).get<int64_t>();
      t.shard = j.at("shard").get<int>();
      t.offset = j.at("offset").get<uint64_t>();
      t.nbytes = j.at("nbytes").get<uint64_t>();
      t.sha256 = j.at("sha256").get<std::string>();
      t.rows_per_block = j.at("rows_per_block").get<int64_t>();
      t.index_at = j.at("index_at").get<uint64_t>();
      const int64_t blocks = j.at("blocks").get<int64_t>();
      const TensorInfo* src = ck.find(t.name);
      if (!src || src->dtype != DType::BF16 || src->shape != std::vector<int64_t>{t.rows, t.cols} ||
          src->shard != t.shard || src->offset != t.offset || src->nbytes != t.nbytes)
        fail(path, "pack was made from another checkpoint (tensor '" + t.name + "' differs); run `sluice pack` again");
      const bool int8 = p.format == SpineFormat::int8;
      if (t.rows_per_block < 1 || t.cols < 1 || t.cols > INT32_MAX ||
          (!int8 && t.rows_per_block > int64_t(codec::kMaxBlockValues) / t.cols) ||
          blocks != (t.rows + t.rows_per_block - 1) / t.rows_per_block || t.index_at < kDataStart ||
          t.index_at + uint64_t(blocks + 1) * 8 > header_at)
        fail(path, "pack header is inconsistent (tensor '" + t.name + "')");
      t.index.resize(size_t(blocks + 1));
      read_exact(path, t.index.data(), t.index.size() * 8, t.index_at);
      uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(t.index.data()), uInt(t.index.size() * 8)));
      t.data_at = t.index_at + t.index.size() * 8;
      if (int8) {  // the blocks' crc32s follow the index, covered by its checksum
        t.block_crc.resize(size_t(blocks));
        if (t.data_at + t.block_crc.size() * 4 > header_at) fail(path, "pack header is inconsistent (tensor '" + t.name + "')");
        read_exact(path, t.block_crc.data(), t.block_crc.size() * 4, t.data_at);
        crc = uint32_t(crc32(crc, reinterpret_cast<const Bytef*>(t.block_crc.data()), uInt(t.block_crc.size() * 4)));
        t.data_at += t.block_crc.size() * 4;
      }
      if (crc != j.at("index_crc32").get<uint32_t>()) fail(path, "block index of tensor '" + t.name + "' fails its checksum");
      if (t.index[0] != 0) fail(path, "block index of tensor '" + t.name + "' is inconsistent");
      for (size_t b = 0; b + 1 < t.index.size(); b++)
        if (t.index[b + 1] <= t.index[b] ||
            (int8 && t.index[b + 1] - t.index[b] != int8_matrix_bytes64(t.block_rows(int64_t(b)), t.cols)))
          fail(path, "block index of tensor '" + t.name + "' is inconsistent");
      if (t.data_at + t.index.back() > header_at) fail(path, "block index of tensor '" + t.name + "' runs past the data");
      p.packed_bytes += t.index.back();
      p.source_bytes += t.nbytes;
      p.tensors.push_back(std::move(t));
    }
    for (size_t i = 0; i < mtimes.size(); i++)
      if (shard_stamp(ck.shard_paths[i]) != ShardStamp{ck.shard_sizes[i], mtimes[i]})
        fail(path, "pack is stale: " + base_name(ck.shard_paths[i]) +
                       " was modified after the pack was made (another revision, or an edit); " + repack_hint(ck, p.format));
  } catch (const json::exception& e) {
    fail(path, std::string("pack header is malformed: ") + e.what());
  }
  return p;
}

PackResult write_pack(const Checkpoint& ck, const PackOptions& opt) {
  if (opt.format == SpineFormat::bf16) fail("pack", "--spine bf16 is the checkpoint itself; pack lossless or int8");
  const bool int8 = opt.format == SpineFormat::int8;
  PackResult r;
  r.path = opt.out.empty() ? pack_path(ck.dir, opt.format) : opt.out;
  struct stat st;
  if (::stat(r.path.c_str(), &st) == 0) {
    try {
      Pack old = open_pack(r.path, ck);
      if (old.format == opt.format) {
        r.up_to_date = true;
        r.source_bytes = old.source_bytes;
        r.packed_bytes = old.packed_bytes;
        return r;
      }
    } catch (const Error& e) {
      r.replaced = e.what();  // stale or damaged: written again below
    }
  }
  // Temps of packs that were killed (SIGKILL, a crash, a power cut) would stay
  // forever, each up to the pack's size.
  remove_dead_temps(parent_dir(r.path), base_name(r.path) + ".tmp.");
  const std::vector<const TensorInfo*> tensors = spine_tensors(ck, opt.format);
  uint64_t total = 0;
  for (const TensorInfo* t : tensors) total += t->nbytes;
  // Written beside its final name and renamed when whole; a failure removes it.
  AtomicFile w(r.path, {.temp = r.path + ".tmp." + std::to_string(::getpid())});
  std::vector<uint8_t> zeros(kDataStart, 0);
  std::memcpy(zeros.data(), kMagic, 8);
  w.write(zeros.data(), zeros.size());
  json h = {{"format", "sluice-pack"}, {"version", kVersion}, {"spine", spine_format_name(opt.format)},
            {"codec", int8 ? "int8-group128-v1" : "bf16-exponent-huffman-v1"}, {"shards", json::array()},
            {"tensors", json::array()}};
  if (int8) h["group"] = kInt8Group;
  // Stamped before the first read: a shard rewritten while it is packed is caught below.
  std::vector<ShardStamp> stamps;
  for (size_t i = 0; i < ck.shard_paths.size(); i++) {
    stamps.push_back(shard_stamp(ck.shard_paths[i]));
    if (stamps.back().bytes != ck.shard_sizes[i]) fail(ck.shard_paths[i], "changed since the checkpoint was opened");
    h["shards"].push_back(
        {{"file", base_name(ck.shard_paths[i])}, {"bytes", ck.shard_sizes[i]}, {"mtime_ns", stamps.back().mtime_ns}});
  }
  uint64_t done = 0;
  std::vector<uint16_t> src;
  for (const TensorInfo* t : tensors) {
    const std::string& shard = ck.shard_paths[size_t(t->shard)];
    const int64_t rows = t->shape[0], cols = t->shape[1];
    if (cols > int64_t(codec::kMaxBlockValues)) fail(shard, "tensor '" + t->name + "' has rows too long to pack");
    // int8: the index, then the blocks' crc32s (reserved like the index).
    const int64_t rpb = pack_rows_per_block(cols);
    const int64_t blocks = (rows + rpb - 1) / rpb;
    // The index goes first: reserve it, fill it as blocks are written.
    const uint64_t index_at = w.at();
    std::vector<uint64_t> index(size_t(blocks + 1), 0);
    std::vector<uint32_t> crcs(int8 ? size_t(blocks) : 0);
    const uint64_t table_bytes = index.size() * 8 + crcs.size() * 4;
    w.skip(table_bytes);
    const uint64_t data_at = w.at();
    Hasher sha;
    const int64_t chunk_blocks = std::max<int64_t>(1, int64_t(kChunkSource / (uint64_t(rpb * cols) * 2)));
    std::vector<std::vector<uint8_t>> enc;
    for (int64_t b0 = 0; b0 < blocks; b0 += chunk_blocks) {
      const int64_t nb = std::min(chunk_blocks, blocks - b0);
      const int64_t r0 = b0 * rpb, r1 = std::min(rows, (b0 + nb) * rpb);
      src.resize(size_t((r1 - r0) * cols));
      read_exact(shard, src.data(), src.size() * 2, t->offset + uint64_t(r0 * cols) * 2);
      sha.update(src.data(), src.size() * 2);
      enc.assign(size_t(nb), {});
      kernels::parallel_for(nb, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) {
          const int64_t br0 = (b0 + i) * rpb, br1 = std::min(rows, br0 + rpb);
          const uint16_t* from = src.data() + (br0 - r0) * cols;
          std::vector<uint8_t>& out = enc[size_t(i)];
          if (!int8) {
            codec::encode_block(from, uint32_t((br1 - br0) * cols), out);
            continue;
          }
          out.resize(int8_matrix_bytes64(br1 - br0, cols));
          quantize_int8_rows(from, int(br1 - br0), int(cols), out.data());
          crcs[size_t(b0 + i)] = uint32_t(crc32(0, out.data(), uInt(out.size())));
        }
      });
      for (int64_t i = 0; i < nb; i++) {
        w.write(enc[size_t(i)].data(), enc[size_t(i)].size());
        index[size_t(b0 + i + 1)] = w.at() - data_at;
      }
      done += uint64_t(r1 - r0) * uint64_t(cols) * 2;
      if (opt.progress) opt.progress(done, total);
    }
    w.write_at(index.data(), index.size() * 8, index_at);
    w.write_at(crcs.data(), crcs.size() * 4, index_at + index.size() * 8);
    uint32_t table_crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(index.data()), uInt(index.size() * 8)));
    if (!crcs.empty()) table_crc = uint32_t(crc32(table_crc, reinterpret_cast<const Bytef*>(crcs.data()), uInt(crcs.size() * 4)));
    h["tensors"].push_back({{"name", key_of(ck, *t)}, {"shape", {rows, cols}}, {"shard", t->shard},
                            {"offset", t->offset}, {"nbytes", t->nbytes}, {"sha256", sha.finish_hex()},
                            {"rows_per_block", rpb}, {"blocks", blocks}, {"index_at", index_at},
                            {"index_crc32", table_crc}});
    r.packed_bytes += index.back();
    r.source_bytes += t->nbytes;
  }
  for (size_t i = 0; i < ck.shard_paths.size(); i++)
    if (shard_stamp(ck.shard_paths[i]) != stamps[i])
      fail(ck.shard_paths[i], "was modified while it was being packed; run `sluice pack` again");
  const std::string text = h.dump(1);
  const uint64_t header_at = w.at();
  w.write(text.data(), text.size());
  uint8_t tr[kTrailer];
  const uint64_t hb = text.size();
  const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(text.data()), uInt(text.size())));
  std::memcpy(tr, &header_at, 8);
  std::memcpy(tr + 8, &hb, 8);
  std::memcpy(tr + 16, &crc, 4);
  std::memcpy(tr + 20, &kTrailerMagic, 4);
  w.write(tr, kTrailer);
  w.commit();
  return r;
}

void check_int8_blocks(const Pack& pack, const PackedTensor& t, int64_t first_block, int64_t n, const uint8_t* blocks) {
  const uint64_t base = t.index[size_t(first_block)];
  kernels::parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) {
      const size_t blk = size_t(first_block + i);
      const uint8_t* p = blocks + (t.index[blk] - base);
      if (uint32_t(crc32(0, p, uInt(t.index[blk + 1] - t.index[blk]))) != t.block_crc[blk])
        fail(pack.path, "block " + std::to_string(blk) + " of tensor '" + t.name +
                            "' fails its checksum (corrupt pack: run `sluice pack` again)");
    }
  });
}

void decode_blocks(const Pack& pack, const PackedTensor& t, int64_t first_block, int64_t n, const uint8_t* blocks,
                   uint16_t* out, bool check) {
  const uint64_t base = t.index[size_t(first_block)];
  kernels::parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) {
      const int64_t blk = first_block + i;
      const uint8_t* p = blocks + (t.index[size_t(blk)] - base);
      const size_t size = size_t(t.index[size_t(blk) + 1] - t.index[size_t(blk)]);
      const std::string where = pack.path;
      if (check && !codec::checksum_ok(p, size))
        fail(where, "block " + std::to_string(blk) + " of tensor '" + t.name +
                        "' fails its checksum (corrupt pack: run `sluice pack` again)");
      codec::decode(p, size, out + i * t.rows_per_block * t.cols, uint32_t(t.block_rows(blk) * t.cols), where);
    }
  });
}

std::vector<std::string> verify_pack(const std::string& path, const Checkpoint& ck) {
  std::vector<std::string> problems;
  Pack p;
  try {
    p = open_pack(path, ck);
  } catch (const Error& e) {
    return {e.what()};
  }
  std::vector<uint16_t> src, dec;
  std::vector<uint8_t> bytes, want;
  const bool int8 = p.format == SpineFormat::int8;
  for (const PackedTensor& t : p.tensors) {
    const std::string& shard = ck.shard_paths[size_t(t.shard)];
    Hasher s_src, s_dec;
    int64_t mismatch = -1;  // int8: the first row of a chunk that is not its source quantized
    const int64_t chunk = std::max<int64_t>(1, int64_t(kChunkSource / (uint64_t(t.rows_per_block * t.cols) * 2)));
    try {
      for (int64_t b0 = 0; b0 < t.blocks(); b0 += chunk) {
        const int64_t nb = std::min(chunk, t.blocks() - b0);
        const int64_t r0 = b0 * t.rows_per_block, r1 = std::min(t.rows, (b0 + nb) * t.rows_per_block);
        src.resize(size_t((r1 - r0) * t.cols));
        if (!int8) dec.resize(src.size());
        read_exact(shard, src.data(), src.size() * 2, t.offset + uint64_t(r0 * t.cols) * 2);
        s_src.update(src.data(), src.size() * 2);
        bytes.resize(size_t(t.index[size_t(b0 + nb)] - t.index[size_t(b0)]));
        read_exact(path, bytes.data(), bytes.size(), t.data_at + t.index[size_t(b0)]);
        if (int8) {
          // Quantizing is deterministic: the blocks must be the source, quantized.
          check_int8_blocks(p, t, b0, nb, bytes.data());
          want.resize(int8_matrix_bytes64(r1 - r0, t.cols));
          quantize_int8_rows(src.data(), int(r1 - r0), int(t.cols), want.data());
          if (want != bytes && mismatch < 0) mismatch = r0;
          continue;
        }
        decode_blocks(p, t, b0, nb, bytes.data(), dec.data(), true);
        s_dec.update(dec.data(), dec.size() * 2);
      }
    } catch (const Error& e) {
      problems.push_back(e.what());
      continue;
    }
    const std::string a = s_src.finish_hex(), b = s_dec.finish_hex();
    if (a != t.sha256)
      problems.push_back(shard + ": tensor '" + t.name + "' changed since it was packed into " + path);
    else if (mismatch >= 0)
      problems.push_back(path + ": tensor '" + t.name + "' is not its source quantized (from row " +
                         std::to_string(mismatch) + ")");
    else if (!int8 && b != t.sha256)
      problems.push_back(path + ": tensor '" + t.name + "' does not decode to its source bytes");
  }
  return problems;
}

}  // namespace sluice
