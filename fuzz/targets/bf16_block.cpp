// The lossless bf16 codec (kernels/bf16_codec.h). Byte 0 picks the test:
//   even: the rest is an encoded block (as a pack holds it), decoded to the
//         number of values its header says (bit 1: one more than that,
//         capped at 2^18 either way). decode and decode_ref must both
//         accept or both refuse it, and agree bitwise; checksum_ok must not
//         read outside it.
//   odd:  the rest is bf16 values; encode_block, then both decoders give them
//         back exactly and the block passes its checksum.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "fuzz/fuzz_util.h"
#include "kernels/bf16_codec.h"

namespace codec = sluice::codec;

namespace {

// Decodes with `fn`; false if the block is refused.
template <class F>
bool decodes(F fn, const uint8_t* block, size_t size, std::vector<uint16_t>& out, uint32_t values) {
  out.assign(values, 0xdead);
  try {
    fn(block, size, out.data(), values, "fuzz");
  } catch (const sluice::Error&) {
    return false;
  }
  return true;
}

void check_block(const uint8_t* data, size_t size, bool one_more) {
  uint32_t want = 0;
  if (size >= 4) std::memcpy(&want, data, 4);
  want = std::min(want + (one_more ? 1 : 0), 1u << 18);  // the output is allocated up front
  // The block in its own allocation, so ASan sees any read past its end.
  std::vector<uint8_t> block(data, data + size);
  (void)codec::checksum_ok(block.data(), block.size());
  std::vector<uint16_t> a, b;
  const bool ok_fast = decodes(codec::decode, block.data(), block.size(), a, want);
  const bool ok_ref = decodes(codec::decode_ref, block.data(), block.size(), b, want);
  if (ok_fast != ok_ref || (ok_fast && a != b)) __builtin_trap();
}

void check_roundtrip(const uint8_t* data, size_t size) {
  const uint32_t n = uint32_t(size / 2);
  std::vector<uint16_t> in(n);
  if (n) std::memcpy(in.data(), data, size_t(n) * 2);
  std::vector<uint8_t> enc;
  const size_t bytes = codec::encode_block(in.data(), n, enc);
  if (bytes != enc.size() || !codec::checksum_ok(enc.data(), enc.size())) __builtin_trap();
  std::vector<uint16_t> a, b;
  if (!decodes(codec::decode, enc.data(), enc.size(), a, n) || a != in) __builtin_trap();
  if (!decodes(codec::decode_ref, enc.data(), enc.size(), b, n) || b != in) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) check_roundtrip(data + 1, size - 1);
  else check_block(data + 1, size - 1, data[0] & 2);
  return 0;
}
