// bench/codec.cpp — the lossless bf16 codec (kernels/bf16_codec.h): ratio and
// decode throughput per core (build/bench_codec). Not a test.
//
// One thread. Decode throughput is GB/s of bf16 output over the thread's CPU
// time (best of --reps), next to two ceilings measured in the same run on the
// same thread: a streaming read of the output's bytes and a memcpy of them
// (decoding reads the packed bytes and writes the output, so memcpy is the
// closer bound). Inputs: Gaussian weights (sigma 0.02), uniform weights in
// (-a, a) (what `make-model` writes for synthetic models such as the
// k3-slice: fewer bits of exponent entropy, shorter codes), and every BF16
// matrix of each --model DIR (the embedding left out, as in a pack).
//
//   bench_codec [--model DIR]... [--reps N] [--mb N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/numeric.h"
#include "base/file_io.h"
#include "checkpoint/checkpoint.h"
#include "kernels/bf16_codec.h"

using namespace sluice;

namespace {

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double best_s(int reps, const std::function<void()>& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; i++) {
    const double t0 = thread_cpu_s();
    f();
    best = std::min(best, thread_cpu_s() - t0);
  }
  return best;
}

uint64_t g_sink = 0;

constexpr uint32_t kBlock = 1 << 16;

void report(const std::string& name, const std::vector<uint16_t>& w, int reps) {
  std::vector<uint8_t> enc;
  std::vector<std::pair<size_t, uint32_t>> blocks;  // offset, values
  for (size_t at = 0; at < w.size(); at += kBlock) {
    const uint32_t n = uint32_t(std::min<size_t>(kBlock, w.size() - at));
    const size_t off = enc.size();
    codec::encode_block(w.data() + at, n, enc);
    blocks.push_back({off, n});
  }
  auto size_of = [&](size_t i) { return (i + 1 < blocks.size() ? blocks[i + 1].first : enc.size()) - blocks[i].first; };
  std::vector<uint16_t> out(w.size()), copy(w.size());
  size_t at = 0;
  auto decode_all = [&](bool ref) {
    at = 0;
    for (size_t i = 0; i < blocks.size(); i++) {
      if (ref) codec::decode_ref(enc.data() + blocks[i].first, size_of(i), out.data() + at, blocks[i].second, name);
      else codec::decode(enc.data() + blocks[i].first, size_of(i), out.data() + at, blocks[i].second, name);
      at += blocks[i].second;
    }
  };
  const double bytes = 2.0 * double(w.size());
  const double fast = best_s(reps, [&] { decode_all(false); });
  if (out != w) {
    std::fprintf(stderr, "bench_codec: %s: decode is not exact\n", name.c_str());
    std::exit(1);
  }
  const double ref = best_s(std::max(1, reps / 5), [&] { decode_all(true); });
  const double crc = best_s(reps, [&] {
    for (size_t i = 0; i < blocks.size(); i++) g_sink += codec::checksum_ok(enc.data() + blocks[i].first, size_of(i));
  });
  const double read = best_s(reps, [&] {
    uint64_t s = 0;
    for (uint16_t v : w) s += v;
    g_sink += s;
  });
  const double cpy = best_s(reps, [&] {
    std::memcpy(copy.data(), w.data(), size_t(bytes));
    g_sink += copy[size_t(g_sink % copy.size())];
  });
  std::printf("%-28s %8.1f MB  ratio %.4f  exp-entropy %.2f bits  decode %5.2f GB/s (ref %4.2f)  crc %5.2f GB/s packed"
              "  | ceiling 1 core: read %5.2f GB/s, memcpy %5.2f GB/s  -> decode/memcpy %.2f\n",
              name.c_str(), bytes / 1e6, double(enc.size()) / bytes, codec::exponent_entropy(w.data(), w.size()),
              bytes / fast / 1e9, bytes / ref / 1e9, double(enc.size()) / crc / 1e9, bytes / read / 1e9,
              bytes / cpy / 1e9, cpy / fast);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  size_t mb = 64;
  std::vector<std::string> models;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--mb" && i + 1 < argc) mb = size_t(std::max(1, std::atoi(argv[++i])));
    else if (a == "--model" && i + 1 < argc) models.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_codec [--model DIR]... [--reps N] [--mb N]\n");
      return 2;
    }
  }
  std::printf("bf16 codec, one thread, %u-value blocks\n", kBlock);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint16_t> g(mb << 19);
  for (uint16_t& v : g) v = f32_to_bf16(normal(rng));
  report("gaussian sigma=0.02", g, reps);
  const float a = std::sqrt(3.0f / 7168);  // make-model: std 1/sqrt(cols), K3 hidden size
  for (uint16_t& v : g) v = f32_to_bf16(std::fma(float(rng() & 0xffff), 2 * a / 65536, -a));
  report("uniform (k3-slice-like)", g, reps);
  for (const std::string& dir : models) {
    const Checkpoint ck = open_checkpoint(dir);
    std::vector<uint16_t> w;
    for (const auto& [name, t] : ck.tensors) {
      if (t.dtype != DType::BF16 || t.shape.size() != 2 || t.shape[0] < 2 || name == "model.embed_tokens.weight") continue;
      const size_t at = w.size();
      w.resize(at + t.nbytes / 2);
      read_exact(ck.shard_paths[size_t(t.shard)], w.data() + at, t.nbytes, t.offset);
    }
    report(dir.substr(dir.find_last_of('/') + 1) + " spine", w, reps);
  }
  return g_sink == 42 ? 1 : 0;
}
