#include "kernels/bf16_codec.h"

#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <queue>

#include "base/error.h"

namespace sluice::codec {

namespace {

constexpr uint32_t kHuffman = 0, kRaw = 1;
constexpr size_t kPad = 8;
constexpr int kLutBits = kMaxCodeBits;

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint8_t exponent_of(uint16_t v) { return uint8_t(v >> 7); }
uint8_t sign_mantissa_of(uint16_t v) { return uint8_t(((v >> 8) & 0x80) | (v & 0x7f)); }
uint16_t join(uint8_t e, uint8_t sm) { return uint16_t(((sm & 0x80u) << 8) | (uint32_t(e) << 7) | (sm & 0x7fu)); }

// Huffman code lengths for `freq`, at most kMaxCodeBits: if the tree is too
// deep, frequencies are halved (rounding up, so none drops to 0) and it is
// built again; all-equal frequencies give depth 8 <= 11, so this ends.
std::array<uint8_t, 256> code_lengths(std::array<uint64_t, 256> freq) {
  std::array<uint8_t, 256> len{};
  int used = 0;
  for (uint64_t f : freq) used += f > 0;
  if (used == 0) return len;
  if (used == 1) {
    for (int s = 0; s < 256; s++)
      if (freq[size_t(s)]) len[size_t(s)] = 1;
    return len;
  }
  for (;;) {
    // Nodes 0..255 are leaves; parents follow. Ties break by node index: deterministic.
    std::vector<uint64_t> weight(freq.begin(), freq.end());
    std::vector<int> parent(256, -1);
    using Item = std::pair<uint64_t, int>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> q;
    for (int s = 0; s < 256; s++)
      if (freq[size_t(s)]) q.push({freq[size_t(s)], s});
    while (q.size() > 1) {
      const Item a = q.top();
      q.pop();
      const Item b = q.top();
      q.pop();
      const int n = int(weight.size());
      weight.push_back(a.first + b.first);
      parent.push_back(-1);
      parent[size_t(a.second)] = n;
      parent[size_t(b.second)] = n;
      q.push({a.first + b.first, n});
    }
    int deepest = 0;
    for (int s = 0; s < 256; s++) {
      if (!freq[size_t(s)]) continue;
      int d = 0;
      for (int n = s; parent[size_t(n)] >= 0; n = parent[size_t(n)]) d++;
      len[size_t(s)] = uint8_t(d);
      deepest = std::max(deepest, d);
    }
    if (deepest <= kMaxCodeBits) return len;
    for (uint64_t& f : freq)
      if (f) f = (f + 1) / 2;
  }
}

// Canonical codes from lengths: shorter codes first, then by symbol. Returns
// false if the lengths do not form a complete prefix code (one symbol of
// length 1 is allowed: its code is 0).
struct Canonical {
  std::array<uint16_t, 256> code{};  // MSB-first
  std::array<int, kMaxCodeBits + 2> first{}, count{}, index{};
  std::vector<uint8_t> sorted;  // symbols by (length, symbol)
};
bool canonical(const std::array<uint8_t, 256>& len, Canonical& c) {
  c.sorted.clear();
  for (int l = 1; l <= kMaxCodeBits; l++)
    for (int s = 0; s < 256; s++)
      if (len[size_t(s)] == l) c.sorted.push_back(uint8_t(s));
  uint64_t kraft = 0;  // in units of 2^-kMaxCodeBits
  int code = 0, prev = 0, at = 0;
  for (int l = 1; l <= kMaxCodeBits; l++) {
    code <<= 1;
    c.first[size_t(l)] = code;
    c.index[size_t(l)] = at;
    c.count[size_t(l)] = 0;
    for (; at < int(c.sorted.size()) && len[c.sorted[size_t(at)]] == l; at++) {
      c.code[c.sorted[size_t(at)]] = uint16_t(code++);
      c.count[size_t(l)]++;
      kraft += 1ull << (kMaxCodeBits - l);
    }
    prev = l;
  }
  (void)prev;
  if (c.sorted.size() == 1) return len[c.sorted[0]] == 1;
  return kraft == (1ull << kMaxCodeBits);
}

uint32_t reverse_bits(uint32_t v, int n) {
  uint32_t r = 0;
  for (int i = 0; i < n; i++) r |= ((v >> i) & 1u) << (n - 1 - i);
  return r;
}

struct Layout {
  uint32_t values = 0, mode = 0;
  std::array<uint32_t, kStreams> stream_bytes{};
  std::array<size_t, kStreams> stream_at{};
  std::array<uint8_t, 256> len{};
};

Layout parse(const uint8_t* b, size_t size, const std::string& where) {
  Layout L;
  if (size < 12) fail(where, "compressed block of " + std::to_string(size) + " bytes is truncated");
  L.values = load32(b);
  L.mode = load32(b + 8);
  if (L.values > kMaxBlockValues) fail(where, "compressed block claims " + std::to_string(L.values) + " values");
  if (L.mode == kRaw) {
    if (size != 12 + 2 * size_t(L.values)) fail(where, "raw block size does not match its value count");
    return L;
  }
  if (L.mode != kHuffman) fail(where, "compressed block has unknown mode " + std::to_string(L.mode));
  if (size < kHeaderBytes) fail(where, "compressed block header is truncated");
  uint64_t at = kHeaderBytes + uint64_t(L.values);
  for (int s = 0; s < kStreams; s++) {
    L.stream_bytes[size_t(s)] = load32(b + 12 + 4 * s);
    L.stream_at[size_t(s)] = size_t(at);
    at += uint64_t(L.stream_bytes[size_t(s)]) + kPad;
  }
  if (at != size) fail(where, "compressed block size does not match its header");
  for (int e = 0; e < 256; e++) L.len[size_t(e)] = uint8_t((b + 12 + 4 * kStreams)[e / 2] >> (4 * (e % 2)) & 15);
  return L;
}

// crc32 of every byte but the crc field itself.
uint32_t block_crc(const uint8_t* b, size_t size) {
  return uint32_t(crc32(crc32(0, b, 4), b + 8, uInt(size - 8)));
}

uint32_t stream_begin(uint32_t n, int s) { return uint32_t(uint64_t(n) * uint64_t(s) / kStreams); }

// LSB-first bit writer.
struct BitWriter {
  std::vector<uint8_t>& out;
  uint64_t acc = 0;
  int bits = 0;
  void put(uint32_t v, int n) {
    acc |= uint64_t(v) << bits;
    bits += n;
    while (bits >= 8) {
      out.push_back(uint8_t(acc));
      acc >>= 8;
      bits -= 8;
    }
  }
  void flush() {
    if (bits > 0) out.push_back(uint8_t(acc));
    acc = 0;
    bits = 0;
  }
};

// out[i] = join(exps[i], sm[i]); 16 at a time with SSE2 (baseline x86-64):
// the low byte is (e & 1) << 7 | (sm & 0x7f), the high byte (sm & 0x80) | e >> 1.
void merge(const uint8_t* exps, const uint8_t* sm, uint32_t n, uint16_t* out) {
  uint32_t i = 0;
#if defined(__SSE2__)
  const __m128i m7f = _mm_set1_epi8(0x7f), m80 = _mm_set1_epi8(char(0x80));
  for (; i + 16 <= n; i += 16) {
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(exps + i));
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm + i));
    const __m128i lo = _mm_or_si128(_mm_and_si128(s, m7f), _mm_and_si128(_mm_slli_epi16(e, 7), m80));
    const __m128i hi = _mm_or_si128(_mm_and_si128(s, m80), _mm_and_si128(_mm_srli_epi16(e, 1), m7f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_unpacklo_epi8(lo, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 8), _mm_unpackhi_epi8(lo, hi));
  }
#endif
  for (; i < n; i++) out[i] = join(exps[i], sm[i]);
}

// The fast decoder's tables for one code. lut: one lookup per code, entry =
// symbol | length << 8, indexed by the next kLutBits bits of a stream (the
// first bit read is the code's top bit, so codes are placed bit-reversed).
// multi: most exponent codes are 1-4 bits, so one lookup can decode several:
// for the next kMultiBits bits, every code that lies wholly within them, up
// to kMultiMax: entry = symbols (bytes 0-6) | bits used << 56 | symbols << 60.
// (The bits past the window are unknown; a code is taken only when its own
// bits are all inside it, and a prefix code's symbol is fixed by its own bits.)
// kMultiBits = the longest code, so every window holds at least one code
// (each lookup makes progress, which the decoder's loops rely on).
constexpr int kMultiBits = kMaxCodeBits;
static_assert(kMultiBits == kLutBits && kMultiBits * 5 <= 57);
constexpr uint32_t kMultiMax = 7;
struct DecodeTables {
  bool built = false;
  std::array<uint8_t, 256> len{};  // the code these are for, once built
  std::array<uint16_t, 1u << kLutBits> lut;
  // Level w (entries [2^w, 2^(w+1))) for w-bit windows; the last is multi.
  std::array<uint64_t, 2u << kMultiBits> levels;
  const uint64_t* multi() const { return levels.data() + (1u << kMultiBits); }

  // Rebuilds for `l` unless they are already its tables (blocks of a matrix
  // often share a code). False when `l` is not a valid code.
  bool build(const std::array<uint8_t, 256>& l) {
    if (built && l == len) return true;
    Canonical c;
    if (!canonical(l, c)) return false;
    built = false;
    if (c.sorted.size() == 1) {
      lut.fill(uint16_t(c.sorted[0] | 1u << 8));
    } else {
      for (uint8_t s : c.sorted) {
        const uint32_t r = reverse_bits(c.code[s], l[s]);
        for (uint32_t j = 0; j < (1u << (kLutBits - l[s])); j++) lut[r | (j << l[s])] = uint16_t(s | uint32_t(l[s]) << 8);
      }
    }
    // A window's first code (from lut: right when its length k <= w, whatever
    // the unknown bits above), then level w - k's entry for the bits after it.
    levels[1] = 0;  // the empty window
    for (uint32_t w = 1; w <= uint32_t(kMultiBits); w++) {
      uint64_t* const t = levels.data() + (1u << w);
      for (uint32_t j = 0; j < (1u << w); j++) {
        const uint32_t e = lut[j], k = e >> 8;
        if (k > w) {
          t[j] = 0;
          continue;
        }
        uint64_t rest = levels[(1u << (w - k)) + (j >> k)];
        if (rest >> 60 == kMultiMax) {  // full: drop its last symbol
          const uint32_t last = uint32_t(rest >> (8 * (kMultiMax - 1))) & 0xffu;
          const uint64_t bits = ((rest >> 56) & 15) - l[last];
          rest = (rest & ((1ull << (8 * (kMultiMax - 1))) - 1)) | bits << 56 | uint64_t(kMultiMax - 1) << 60;
        }
        t[j] = (rest & ((1ull << 56) - 1)) << 8 | (e & 0xffu) | (((rest >> 56) & 15) + k) << 56 | ((rest >> 60) + 1) << 60;
      }
    }
    len = l;
    built = true;
    return true;
  }
};

}  // namespace

size_t encode_block(const uint16_t* in, uint32_t n, std::vector<uint8_t>& out) {
  if (n > kMaxBlockValues) fail("bf16 codec", "block of " + std::to_string(n) + " values is too large");
  const size_t start = out.size();
  std::array<uint64_t, 256> freq{};
  for (uint32_t i = 0; i < n; i++) freq[exponent_of(in[i])]++;
  const std::array<uint8_t, 256> len = code_lengths(freq);
  Canonical c;
  canonical(len, c);
  out.resize(start + kHeaderBytes);
  store32(out.data() + start, n);
  store32(out.data() + start + 8, kHuffman);
  for (int e = 0; e < 256; e++) out[start + 12 + 4 * kStreams + size_t(e / 2)] |= uint8_t(len[size_t(e)] << (4 * (e % 2)));
  for (uint32_t i = 0; i < n; i++) out.push_back(sign_mantissa_of(in[i]));
  for (int s = 0; s < kStreams; s++) {
    const size_t at = out.size();
    BitWriter w{out};
    for (uint32_t i = stream_begin(n, s); i < stream_begin(n, s + 1); i++) {
      const uint8_t e = exponent_of(in[i]);
      w.put(reverse_bits(c.code[e], len[e]), len[e]);
    }
    w.flush();
    store32(out.data() + start + 12 + 4 * s, uint32_t(out.size() - at));
    out.insert(out.end(), kPad, 0);
  }
  if (out.size() - start >= 12 + 2 * size_t(n)) {  // coding does not pay: store raw
    out.resize(start + 12);
    store32(out.data() + start + 8, kRaw);
    const size_t at = out.size();
    out.resize(at + 2 * size_t(n));
    if (n > 0) std::memcpy(out.data() + at, in, 2 * size_t(n));  // n == 0: `in` may be null
  }
  const size_t size = out.size() - start;
  store32(out.data() + start + 4, block_crc(out.data() + start, size));
  return size;
}

bool checksum_ok(const uint8_t* block, size_t size) {
  if (size < 12) return false;
  return load32(block + 4) == block_crc(block, size);
}

void decode_ref(const uint8_t* block, size_t size, uint16_t* out, uint32_t values, const std::string& where) {
  const Layout L = parse(block, size, where);
  if (L.values != values) fail(where, "compressed block holds " + std::to_string(L.values) + " values, expected " + std::to_string(values));
  if (L.mode == kRaw) {
    if (values > 0) std::memcpy(out, block + 12, 2 * size_t(values));
    return;
  }
  Canonical c;
  if (values > 0 && !canonical(L.len, c)) fail(where, "compressed block has an invalid code table");
  const uint8_t* sm = block + kHeaderBytes;
  for (int s = 0; s < kStreams; s++) {
    const uint8_t* p = block + L.stream_at[size_t(s)];
    const uint64_t nbits = uint64_t(L.stream_bytes[size_t(s)]) * 8;
    uint64_t pos = 0;
    for (uint32_t i = stream_begin(values, s); i < stream_begin(values, s + 1); i++) {
      int code = 0, l = 1;
      for (;; l++) {
        if (l > kMaxCodeBits) fail(where, "compressed block has an invalid code");
        if (pos >= nbits) fail(where, "compressed block's exponent stream ends early");
        code = (code << 1) | ((p[pos / 8] >> (pos % 8)) & 1);
        pos++;
        const int k = code - c.first[size_t(l)];
        if (k >= 0 && k < c.count[size_t(l)]) {
          out[i] = join(c.sorted[size_t(c.index[size_t(l)] + k)], sm[i]);
          break;
        }
      }
    }
  }
}

void decode(const uint8_t* block, size_t size, uint16_t* out, uint32_t values, const std::string& where) {
  const Layout L = parse(block, size, where);
  if (L.values != values) fail(where, "compressed block holds " + std::to_string(L.values) + " values, expected " + std::to_string(values));
  if (L.mode == kRaw) {
    if (values > 0) std::memcpy(out, block + 12, 2 * size_t(values));
    return;
  }
  if (values == 0) return;
  thread_local DecodeTables tables;
  if (!tables.build(L.len)) fail(where, "compressed block has an invalid code table");
  const uint16_t* const lut = tables.lut.data();
  const uint64_t* const multi = tables.multi();
  thread_local std::vector<uint8_t> exps;
  if (exps.size() < values) exps.resize(values);
  // Stream s: bit position pos[s] from the block's start; a load at byte
  // b <= last[s] stays within its padding. Positions only grow, so a stream
  // that ran past its end is still past it at the end (checked there); until
  // then loads are clamped, which keeps a corrupt block in bounds.
  uint64_t pos[kStreams], last[kStreams];
  for (int s = 0; s < kStreams; s++) {
    pos[s] = uint64_t(L.stream_at[size_t(s)]) * 8;
    last[s] = L.stream_at[size_t(s)] + L.stream_bytes[size_t(s)];
  }
  uint8_t* const ex = exps.data();
  // Rounds of kSteps lookups per stream (kSteps windows fit in the 57 bits
  // one unaligned 8-byte load guarantees), each storing 8 bytes at the
  // stream's output position: at most kSteps * kMultiMax symbols and 1
  // scratch byte, so a round runs only while every stream has that room.
  // Four streams go in lockstep (independent chains the core overlaps). Then
  // each stream on its own: one lookup at a time while 8 values are left,
  // then one code at a time. (Merging each stream's finished exponents with
  // their sign and mantissa as rounds go, instead of in one pass at the end,
  // measured 30 % slower.)
  constexpr uint64_t kMask = (1u << kLutBits) - 1, kMultiMask = (1u << kMultiBits) - 1;
  constexpr int kSteps = 57 / kMultiBits;
  constexpr ptrdiff_t kRoom = kSteps * kMultiMax + 1;
  uint8_t* d[kStreams];
  uint8_t* stop[kStreams];
  for (int s = 0; s < kStreams; s++) d[s] = ex + stream_begin(values, s), stop[s] = ex + stream_begin(values, s + 1);
  auto window = [&](int s) { return load64(block + std::min(pos[s] >> 3, last[s])) >> (pos[s] & 7); };
  // One lookup: stores its symbols at o, returns the bits it used.
  auto step = [multi](uint64_t& v, uint8_t*& o) __attribute__((always_inline)) {
    const uint64_t e = multi[v & kMultiMask];
    std::memcpy(o, &e, 8);
    o += e >> 60;
    const uint64_t b = (e >> 56) & 15;
    v >>= b;
    return b;
  };
  for (;;) {
    bool room = true;
    for (int s = 0; s < kStreams; s++) room &= stop[s] - d[s] >= kRoom;
    if (!room) break;
    for (int g = 0; g < kStreams; g += 4) {
      uint64_t v0 = window(g), v1 = window(g + 1), v2 = window(g + 2), v3 = window(g + 3);
      uint8_t *o0 = d[g], *o1 = d[g + 1], *o2 = d[g + 2], *o3 = d[g + 3];
      uint64_t u0 = 0, u1 = 0, u2 = 0, u3 = 0;
#pragma GCC unroll 8
      for (int k = 0; k < kSteps; k++) {
        u0 += step(v0, o0);
        u1 += step(v1, o1);
        u2 += step(v2, o2);
        u3 += step(v3, o3);
      }
      pos[g] += u0, pos[g + 1] += u1, pos[g + 2] += u2, pos[g + 3] += u3;
      d[g] = o0, d[g + 1] = o1, d[g + 2] = o2, d[g + 3] = o3;
    }
  }
  for (int s = 0; s < kStreams; s++) {
    uint8_t* o = d[s];
    while (stop[s] - o >= ptrdiff_t(kMultiMax) + 1) {
      uint64_t v = window(s);
      pos[s] += step(v, o);
    }
    for (; o < stop[s]; o++) {
      const uint32_t e = lut[window(s) & kMask];
      *o = uint8_t(e);
      pos[s] += e >> 8;
    }
  }
  bool bad = false;
  for (int s = 0; s < kStreams; s++) bad |= pos[s] > last[s] * 8;
  if (bad) fail(where, "compressed block's exponent stream ends early");
  merge(ex, block + kHeaderBytes, values, out);
}

double exponent_entropy(const uint16_t* in, size_t n) {
  if (n == 0) return 0;
  std::array<uint64_t, 256> freq{};
  for (size_t i = 0; i < n; i++) freq[exponent_of(in[i])]++;
  double h = 0;
  for (uint64_t f : freq)
    if (f) h -= double(f) / double(n) * std::log2(double(f) / double(n));
  return h;
}

}  // namespace sluice::codec
