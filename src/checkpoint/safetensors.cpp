#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_io.h"
#include "base/json_parse.h"
#include "base/read_file.h"

namespace sluice {

namespace {

struct DTypeInfo {
  const char* code;
  DType type;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {"BF16", DType::BF16, 2}, {"F16", DType::F16, 2}, {"F32", DType::F32, 4}, {"F64", DType::F64, 8},
    {"U8", DType::U8, 1},     {"I8", DType::I8, 1},   {"I16", DType::I16, 2}, {"I32", DType::I32, 4},
    {"I64", DType::I64, 8},   {"BOOL", DType::BOOL, 1},
};

}  // namespace

const char* dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.code;
  return "?";
}

size_t dtype_size(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.size;
  return 0;
}

bool parse_dtype(std::string_view code, DType* out) {
  for (const auto& d : kDTypes)
    if (code == d.code) {
      *out = d.type;
      return true;
    }
  return false;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ShardHeader parse_safetensors_header(std::string_view json_text, uint64_t file_size,
                                     const std::string& path) {
  using json = nlohmann::json;
  ShardHeader h;
  h.path = path;
  h.file_size = file_size;
  h.data_start = 8 + json_text.size();
  if (h.data_start > file_size) fail(path, "truncated: header runs past the end of the file");
  const uint64_t data_size = file_size - h.data_start;

  // A header is an object of objects of arrays: depth 3 (8 leaves room).
  if (json_too_deep(json_text, 8)) fail(path, "corrupt safetensors header: not valid JSON (nested too deeply)");
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (doc.is_discarded()) fail(path, "corrupt safetensors header: not valid JSON");
  if (!doc.is_object()) fail(path, "corrupt safetensors header: not a JSON object");

  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& e = *it;
    auto bad = [&](const std::string& what) { fail(path, "tensor '" + name + "': " + what); };
    if (!e.is_object()) bad("entry is not an object");
    auto dt = e.find("dtype");
    auto sh = e.find("shape");
    auto off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string()) bad("missing or invalid dtype");
    if (sh == e.end() || !sh->is_array()) bad("missing or invalid shape");
    if (off == e.end() || !off->is_array() || off->size() != 2) bad("missing or invalid data_offsets");
    TensorInfo t;
    t.name = name;
    std::string code = dt->get<std::string>();
    if (!parse_dtype(code, &t.dtype)) bad("unsupported dtype '" + code + "'");
    uint64_t numel = 1;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) bad("shape must hold non-negative integers");
      uint64_t v = d.get<uint64_t>();
      if (v > (1ull << 40) || (v && numel > (1ull << 50) / v)) bad("shape is implausibly large");
      numel *= v;
      t.shape.push_back(int64_t(v));
    }
    for (const json& o : *off)
      if (!o.is_number_unsigned()) bad("data_offsets must be non-negative integers");
    uint64_t b = (*off)[0].get<uint64_t>(), en = (*off)[1].get<uint64_t>();
    if (en < b) bad("data_offsets end before they begin");
    if (en > data_size)
      bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + ") run past the end of the data (" +
          std::to_string(data_size) + " bytes; file truncated?)");
    uint64_t expect = numel * dtype_size(t.dtype);
    if (en - b != expect)
      bad("byte length " + std::to_string(en - b) + " does not match shape x dtype (" + std::to_string(expect) + ")");
    t.offset = h.data_start + b;
    t.nbytes = en - b;
    ranges.push_back({b, en, h.tensors.size()});
    h.tensors.push_back(std::move(t));
  }
  // The tensors must tile the data region exactly, as the format requires: no
  // overlap, no gap, nothing after the last one (a shard that does not is
  // damaged or was written by something that disagrees about the layout).
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t covered = 0;
  for (size_t i = 0; i < ranges.size(); i++) {
    if (ranges[i].begin < covered)
      fail(path, "tensors '" + h.tensors[ranges[i - 1].index].name + "' and '" + h.tensors[ranges[i].index].name +
                     "' overlap");
    if (ranges[i].begin > covered)
      fail(path, "corrupt safetensors header: " + std::to_string(ranges[i].begin - covered) +
                     " bytes of the data region before tensor '" + h.tensors[ranges[i].index].name +
                     "' belong to no tensor");
    covered = ranges[i].end;
  }
  if (covered != data_size)
    fail(path, "corrupt safetensors header: the tensors end at data offset " + std::to_string(covered) + " but the data region holds " +
                   std::to_string(data_size) + " bytes (file padded or truncated?)");
  return h;
}

ShardHeader read_safetensors_header(const std::string& path) {
  int fd = open_regular_file(path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  uint64_t file_size = uint64_t(st.st_size);
  if (file_size < 8) fail(path, "truncated: shorter than the 8-byte header length");
  uint8_t len_bytes[8];
  if (pread(fd, len_bytes, 8, 0) != 8) fail(path, "cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | len_bytes[i];
  if (n == 0 || n > kMaxSafetensorsHeader)
    fail(path, "corrupt safetensors header: implausible header length " + std::to_string(n));
  if (8 + n > file_size)
    fail(path, "truncated: header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)");
  std::string text(n, '\0');
  read_exact(fd, text.data(), n, 8, path);
  return parse_safetensors_header(text, file_size, path);
}

}  // namespace sluice
