// kernels/bf16_codec.h — lossless compression of bf16 weights, in blocks.
//
// Why here: decoding is a hot-path kernel (it runs on the kernel thread pool
// right before the matmul that consumes its output, like the matmuls in
// fast.h), and the pack files (pack/) and the spine only move its blocks.
//
// A bf16 value is sign(1) exponent(8) mantissa(7). Trained weights use few
// exponents (~2.6 bits of entropy) while sign and mantissa are close to
// random. So a block stores the sign+mantissa byte of each value raw and
// Huffman-codes the exponent byte (code lengths at most 11 bits, so one
// 2048-entry table decodes any code with one lookup). The exponents of a block
// are cut into 8 contiguous runs, each its own bit stream, so a decoder can
// follow 8 independent dependency chains at once. Blocks are independent:
// a matrix is a list of blocks, and blocks decode in parallel.
//
// Encoded block layout (little-endian):
//   u32 values        number of bf16 values (<= kMaxBlockValues)
//   u32 crc32         zlib crc32 of every other byte of the block
//   u32 mode          0 = Huffman, 1 = raw (the values as they are: used when
//                     coding would not save, e.g. random bit patterns)
//   u32 stream_bytes[8]   (Huffman) bytes of each exponent bit stream
//   u8  lengths[128]  (Huffman) code length of exponent e in nibble e (low
//                     nibble first), 0 = exponent absent
//   u8  sign_mantissa[values]   (Huffman) (v >> 8 & 0x80) | (v & 0x7f)
//   streams, each followed by 8 zero bytes (a decoder may load 8 bytes at
//   any byte of a stream)
// A raw block is the header's first 12 bytes, then values × u16.
//
// Decoding never reads outside the block and never writes outside `out`,
// whatever the bytes say; a block that does not decode to exactly `values`
// values throws. The checksum is checked by verify_block (callers do it at
// least on a block's first read, see pack/pack.h); decoding alone does not
// detect every corruption.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::codec {

constexpr uint32_t kMaxBlockValues = 1u << 20;
constexpr int kStreams = 8;
constexpr int kMaxCodeBits = 11;
constexpr size_t kHeaderBytes = 12 + 4 * kStreams + 128;

// Appends the encoding of in[0..n) to `out`; returns its size in bytes.
size_t encode_block(const uint16_t* in, uint32_t n, std::vector<uint8_t>& out);

// True when the stored crc32 matches the block's bytes.
bool checksum_ok(const uint8_t* block, size_t size);

// Decodes a block of `size` bytes into out[0..values). Throws sluice::Error
// naming `where` if the block is malformed. decode_ref is the plain
// bit-by-bit definition; decode is the fast one. They agree bitwise.
void decode_ref(const uint8_t* block, size_t size, uint16_t* out, uint32_t values, const std::string& where);
void decode(const uint8_t* block, size_t size, uint16_t* out, uint32_t values, const std::string& where);

// Empirical entropy of the exponent field, in bits per value (for reports).
double exponent_entropy(const uint16_t* in, size_t n);

}  // namespace sluice::codec
