#include "checkpoint/safetensors_writer.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <cstdlib>
#include <future>
#include <memory>
#include <numeric>
#include <set>

#include "base/atomic_file.h"
#include "base/error.h"

namespace sluice {

uint64_t TensorData::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) fail(name, "negative dimension in shape");
    n *= uint64_t(d);
  }
  return n;
}

namespace {

std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

SafetensorsLayout layout_safetensors(std::span<const TensorData> tensors,
                                     const std::map<std::string, std::string>& metadata) {
  SafetensorsLayout out;
  out.begin.resize(tensors.size());
  uint64_t pos = 0;
  std::set<std::string_view> names;
  for (size_t i = 0; i < tensors.size(); i++) {
    const TensorData& t = tensors[i];
    if (t.name.empty()) fail("safetensors", "tensor with an empty name");
    if (t.name == "__metadata__") fail(t.name, "reserved name used for a tensor");
    if (!names.insert(t.name).second) fail(t.name, "tensor listed twice");
    uint64_t n = t.nbytes();
    if (!t.fill && t.bytes.size() != n)
      fail(t.name, "holds " + std::to_string(t.bytes.size()) + " bytes but its shape needs " + std::to_string(n));
    out.begin[i] = pos;
    pos += n;
  }
  out.data_size = pos;

  // Header entries in name order, "__metadata__" first.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a].name < tensors[b].name; });
  std::string h = "{";
  if (!metadata.empty()) h += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  for (size_t i : order) {
    const TensorData& t = tensors[i];
    if (h.size() > 1) h += ",";
    h += json_string(t.name) + ":{\"dtype\":\"" + dtype_name(t.dtype) + "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); d++) h += (d ? "," : "") + std::to_string(t.shape[d]);
    h += "],\"data_offsets\":[" + std::to_string(out.begin[i]) + "," + std::to_string(out.begin[i] + t.nbytes()) +
         "]}";
  }
  h += "}";
  while ((8 + h.size()) % 8 != 0) h += ' ';
  out.header = std::move(h);
  out.data_start = 8 + out.header.size();
  return out;
}

void write_safetensors(const std::string& path, std::span<const TensorData> tensors) {
  write_safetensors(path, tensors, layout_safetensors(tensors), kDirectIoFrom);
}

void write_safetensors(const std::string& path, std::span<const TensorData> tensors,
                       const SafetensorsLayout& layout, uint64_t direct_io_from) {
  if (layout.begin.size() != tensors.size()) fail(path, "layout does not match the tensor list");
  AtomicFile file(path, {.temp = {}, .direct = layout.file_size() >= direct_io_from});
  file.reserve(layout.file_size());

  // Two buffers: one is filled while the other is written by a helper thread,
  // so generating bytes and writing them overlap. With O_DIRECT only whole
  // 4 KiB blocks go out; the ragged rest moves to the front of the next buffer
  // and the last block is zero-padded, then truncated away.
  constexpr size_t kAlign = 4096;
  const size_t fill_limit = size_t(std::clamp<uint64_t>(layout.file_size(), kFillChunk, 16 * kFillChunk)) + kAlign;
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  // Room for the padding of the last block; aligned_alloc wants a whole number of blocks.
  const size_t capacity = (fill_limit + 2 * kAlign - 1) & ~(kAlign - 1);
  std::unique_ptr<uint8_t, FreeDeleter> buf[2];
  for (auto& b : buf) {
    b.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, capacity)));
    if (!b) fail(path, "out of memory for write buffers");
  }
  int cur = 0;
  size_t used = 0;
  uint64_t written = 0;       // bytes handed to the writer thread
  std::future<void> pending;  // declared after the buffers: joined before they are freed
  auto flush = [&](bool last) {
    if (pending.valid()) pending.get();  // the other buffer is free again
    uint8_t* p = buf[cur].get();
    size_t n = used;
    if (file.direct() && !last) n = used & ~(kAlign - 1);
    if (file.direct() && last) {
      n = (used + kAlign - 1) & ~(kAlign - 1);
      std::memset(p + used, 0, n - used);
    }
    if (n > 0) pending = std::async(std::launch::async, [&file, p, n] { file.write(p, n); });
    size_t tail = n < used ? used - n : 0;
    if (tail > 0) std::memcpy(buf[cur ^ 1].get(), p + n, tail);
    written += n;
    cur ^= 1;
    used = tail;
  };
  auto room = [&](size_t n) -> uint8_t* {
    if (used + n > fill_limit) flush(false);
    uint8_t* p = buf[cur].get() + used;
    used += n;
    return p;
  };

  uint64_t hlen = layout.header.size();
  uint8_t* p = room(8);
  for (int i = 0; i < 8; i++) p[i] = uint8_t(hlen >> (8 * i));
  for (size_t off = 0; off < hlen; off += kFillChunk) {
    size_t n = size_t(std::min<uint64_t>(kFillChunk, hlen - off));
    std::memcpy(room(n), layout.header.data() + off, n);
  }
  for (size_t i = 0; i < tensors.size(); i++) {
    const TensorData& t = tensors[i];
    uint64_t pos = written + used - layout.data_start;
    if (pos != layout.begin[i]) fail(path, "layout does not match tensor " + t.name);
    uint64_t n = t.nbytes();
    for (uint64_t off = 0; off < n; off += kFillChunk) {
      size_t len = size_t(std::min<uint64_t>(kFillChunk, n - off));
      uint8_t* dst = room(len);
      if (t.fill) t.fill(std::span<uint8_t>(dst, len), off);
      else std::memcpy(dst, t.bytes.data() + off, len);
    }
  }
  flush(true);
  if (pending.valid()) pending.get();
  if (file.direct()) file.truncate(layout.file_size());
  file.commit(int64_t(layout.file_size()));
}

nlohmann::json make_shard_index(const std::map<std::string, std::string>& weight_map, uint64_t total_size) {
  nlohmann::json doc;
  doc["metadata"]["total_size"] = total_size;
  doc["weight_map"] = weight_map;
  return doc;
}

uint64_t free_disk_bytes(const std::string& path) {
  std::filesystem::path p = std::filesystem::absolute(path);
  std::error_code ec;
  while (!std::filesystem::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  struct statvfs st;
  if (::statvfs(p.c_str(), &st) != 0) fail(path, std::string("cannot read free space: ") + std::strerror(errno));
  return uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
}

}  // namespace sluice
