// The bf16 codec: round trips bit-exact, fast decoder == reference decoder,
// on random values and on the real weights of nanoK3 and the k3-tiny fixture;
// corrupt or truncated blocks fail cleanly.
#include "kernels/bf16_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/numeric.h"
#include "base/file_io.h"
#include "checkpoint/checkpoint.h"

namespace sluice {
namespace {

using Rng = std::mt19937_64;

std::vector<uint16_t> gaussian_bf16(Rng& rng, size_t n, float sigma) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<uint16_t> w(n);
  for (uint16_t& v : w) v = f32_to_bf16(normal(rng));
  return w;
}

std::vector<uint16_t> any_bits(Rng& rng, size_t n) {
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  std::vector<uint16_t> w(n);
  for (uint16_t& v : w) v = uint16_t(bits(rng));
  return w;
}

// Encodes, checks the checksum, decodes with both decoders; returns the encoded size.
size_t round_trip(const std::vector<uint16_t>& in) {
  std::vector<uint8_t> enc = {0xaa};  // encoding appends: start off zero
  const size_t size = codec::encode_block(in.data(), uint32_t(in.size()), enc);
  EXPECT_EQ(size, enc.size() - 1);
  const uint8_t* b = enc.data() + 1;
  EXPECT_TRUE(codec::checksum_ok(b, size));
  std::vector<uint16_t> a(in.size() + 1, 0x1234), f(in.size() + 1, 0x1234);
  codec::decode_ref(b, size, a.data(), uint32_t(in.size()), "t");
  codec::decode(b, size, f.data(), uint32_t(in.size()), "t");
  EXPECT_EQ(a.back(), 0x1234);  // nothing written past the end
  EXPECT_EQ(f.back(), 0x1234);
  a.pop_back();
  f.pop_back();
  EXPECT_EQ(a, in);
  EXPECT_EQ(f, in);
  return size;
}

TEST(Bf16Codec, RoundTripsRandomValuesOfEverySize) {
  Rng rng(1);
  for (size_t n : {0, 1, 2, 7, 8, 9, 39, 40, 41, 47, 48, 100, 1001, 65536, 65537, 300000}) {
    SCOPED_TRACE(n);
    round_trip(gaussian_bf16(rng, n, 0.02f));
    round_trip(any_bits(rng, n));
  }
}

TEST(Bf16Codec, GaussianWeightsCompress) {
  Rng rng(2);
  const auto w = gaussian_bf16(rng, 1 << 16, 0.02f);
  const size_t size = round_trip(w);
  // ~2.7 bits of exponent entropy: (8 + ~2.8) / 16 of the bytes.
  EXPECT_LT(double(size) / double(2 * w.size()), 0.70);
  EXPECT_GT(codec::exponent_entropy(w.data(), w.size()), 2.0);
}

TEST(Bf16Codec, RandomBitsAreStoredRaw) {
  Rng rng(3);
  const auto w = any_bits(rng, 5000);
  EXPECT_EQ(round_trip(w), 12 + 2 * w.size());
}

TEST(Bf16Codec, SingleExponentAndSkewedCodes) {
  std::vector<uint16_t> same(4099, 0x3f80);  // every value 1.0
  for (size_t i = 0; i < same.size(); i += 3) same[i] ^= 0x8000 | uint16_t(i & 0x7f);
  round_trip(same);
  // One exponent very common, the others rare: long codes, capped at 11 bits.
  Rng rng(4);
  std::uniform_int_distribution<int> e(0, 255), coin(0, 9999);
  std::vector<uint16_t> skew(200000);
  for (uint16_t& v : skew) v = uint16_t((coin(rng) ? 120 : e(rng)) << 7 | (coin(rng) & 0x7f) | (coin(rng) & 1) << 15);
  round_trip(skew);
}

// The fast decoder keeps its tables from one block to the next when the code
// is the same: blocks in a random order, from different distributions, with
// codes of 1 to 11 bits (up to 7 codes per lookup), some sharing one code (a
// block and its values shuffled have the same histogram), decoded back to back
// on one thread, equal the reference decoder's output bit for bit.
TEST(Bf16Codec, FastDecoderEqualsReferenceAcrossBlocksSharingTables) {
  Rng rng(6);
  std::uniform_int_distribution<int> pick(0, 4), size(1, 70000), e(0, 255), coin(0, 999);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<uint16_t> prev;
  for (int k = 0; k < 60; k++) {
    SCOPED_TRACE(k);
    std::vector<uint16_t> w;
    const size_t n = size_t(size(rng));
    switch (pick(rng)) {
      case 0: w = gaussian_bf16(rng, n, 0.02f); break;
      case 1:  // uniform in (-a, a), like the synthetic k3-slice weights
        for (size_t i = 0; i < n; i++) w.push_back(f32_to_bf16(0.012f * unit(rng)));
        break;
      case 2:  // one exponent in ~3/4 of the values: 1-bit codes
        for (size_t i = 0; i < n; i++) w.push_back(uint16_t((coin(rng) < 750 ? 121 : e(rng)) << 7 | (coin(rng) & 0x807f)));
        break;
      case 3: w.assign(n, uint16_t(0x3c00 | (k & 0x7f))); break;  // a single exponent
      default:  // the previous block shuffled: the same code, other streams
        w = prev.empty() ? gaussian_bf16(rng, n, 0.5f) : prev;
        std::shuffle(w.begin(), w.end(), rng);
    }
    std::vector<uint8_t> enc;
    const size_t bytes = codec::encode_block(w.data(), uint32_t(w.size()), enc);
    std::vector<uint16_t> a(w.size()), f(w.size());
    codec::decode_ref(enc.data(), bytes, a.data(), uint32_t(w.size()), "t");
    codec::decode(enc.data(), bytes, f.data(), uint32_t(w.size()), "t");
    ASSERT_EQ(a, w);
    ASSERT_EQ(f, a);
    prev = w;
  }
}

// A block whose code table is empty fails, also on a thread that has
// decoded nothing yet (whose kept tables are for no code at all).
TEST(Bf16Codec, EmptyCodeTableFailsOnAFreshThread) {
  Rng rng(7);
  const auto w = gaussian_bf16(rng, 5000, 0.02f);
  std::vector<uint8_t> enc;
  const size_t size = codec::encode_block(w.data(), uint32_t(w.size()), enc);
  std::fill(enc.begin() + 12 + 4 * codec::kStreams, enc.begin() + ptrdiff_t(codec::kHeaderBytes), uint8_t(0));
  std::vector<uint16_t> out(w.size());
  std::string error;
  std::thread([&] {
    try {
      codec::decode(enc.data(), size, out.data(), uint32_t(w.size()), "blk");
    } catch (const Error& e) {
      error = e.what();
    }
  }).join();
  EXPECT_EQ(error, "blk: compressed block has an invalid code table");
  EXPECT_THROW(codec::decode_ref(enc.data(), size, out.data(), uint32_t(w.size()), "blk"), Error);
}

// Every BF16 matrix of a real checkpoint, in 64K-value blocks.
void check_checkpoint(const std::string& dir, double max_ratio) {
  const Checkpoint ck = open_checkpoint(dir);
  uint64_t raw = 0, packed = 0;
  for (const auto& [name, t] : ck.tensors) {
    if (t.dtype != DType::BF16 || t.shape.size() != 2) continue;
    std::vector<uint16_t> w(t.nbytes / 2);
    read_exact(ck.shard_paths[size_t(t.shard)], w.data(), t.nbytes, t.offset);
    for (size_t at = 0; at < w.size(); at += 65536) {
      std::vector<uint16_t> part(w.begin() + ptrdiff_t(at), w.begin() + ptrdiff_t(std::min(w.size(), at + 65536)));
      packed += round_trip(part);
      raw += 2 * part.size();
    }
  }
  ASSERT_GT(raw, 0u);
  EXPECT_LT(double(packed) / double(raw), max_ratio) << dir;
}

TEST(Bf16Codec, RoundTripsNanoK3) { check_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/models/nanok3", 0.80); }
TEST(Bf16Codec, RoundTripsK3TinyFixture) {
  check_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model", 1.0);
}

TEST(Bf16Codec, CorruptBlocksFailCleanly) {
  Rng rng(5);
  const auto w = gaussian_bf16(rng, 3000, 0.05f);
  std::vector<uint8_t> enc;
  const size_t size = codec::encode_block(w.data(), uint32_t(w.size()), enc);
  std::uniform_int_distribution<size_t> at(0, size - 1);
  std::uniform_int_distribution<int> bit(0, 7);
  std::vector<uint16_t> out(w.size());
  for (int k = 0; k < 3000; k++) {
    std::vector<uint8_t> bad = enc;
    bad[at(rng)] ^= uint8_t(1 << bit(rng));
    EXPECT_FALSE(codec::checksum_ok(bad.data(), size));
    // Decoding unchecked bytes may give other numbers but must stay in bounds
    // (the sanitizer build checks that) or throw sluice::Error.
    for (int fast = 0; fast < 2; fast++) {
      try {
        if (fast) codec::decode(bad.data(), size, out.data(), uint32_t(w.size()), "blk");
        else codec::decode_ref(bad.data(), size, out.data(), uint32_t(w.size()), "blk");
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("blk: "), std::string::npos);
      }
    }
  }
  // Truncated: a clear error from both decoders.
  EXPECT_THROW(codec::decode(enc.data(), size - 1, out.data(), uint32_t(w.size()), "blk"), Error);
  EXPECT_THROW(codec::decode_ref(enc.data(), size - 9, out.data(), uint32_t(w.size()), "blk"), Error);
  EXPECT_THROW(codec::decode(enc.data(), 5, out.data(), uint32_t(w.size()), "blk"), Error);
  // The wrong value count.
  EXPECT_THROW(codec::decode(enc.data(), size, out.data(), uint32_t(w.size() - 1), "blk"), Error);
}

}  // namespace
}  // namespace sluice
