// The safetensors header parser: the JSON after the 8-byte length, checked
// against a file size (the first input byte adds that much data after it).
#include "base/error.h"
#include "checkpoint/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint64_t data_bytes = uint64_t(data[0]) * 8;
  const std::string_view text = sluice::fuzz::as_text(data + 1, size - 1);
  try {
    sluice::ShardHeader h = sluice::parse_safetensors_header(text, 8 + text.size() + data_bytes, "fuzz.safetensors");
    // Accepted: every tensor lies inside the data region.
    for (const auto& t : h.tensors)
      if (t.offset < h.data_start || t.offset + t.nbytes > h.file_size) __builtin_trap();
  } catch (const sluice::Error&) {
  }
  return 0;
}
