// bench/int8_quant.cpp — how much an int8 spine loses, by scale group size
// (build/bench_int8_quant). Not a test: the measurement behind pack/int8.h's
// choice of groups of 128.
//
// For every matrix an int8 pack would quantize (each BF16 2-D tensor but the
// embedding) of each --model DIR, quantizes every row with scales per group of
// G values (G = 32, 64, 128, 256, and one scale per row) and prints the
// relative weight error sqrt(Σ(w − ŵ)² / Σw²) over the whole spine, the worst
// single matrix's, and the bytes per weight (int8 + fp32 scales).
//
//   bench_int8_quant --model DIR [--model DIR]...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "base/numeric.h"
#include "checkpoint/checkpoint.h"
#include "pack/int8.h"

using namespace sluice;

int main(int argc, char** argv) {
  std::vector<std::string> models;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) models.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_int8_quant --model DIR [--model DIR]...\n");
      return 2;
    }
  }
  const int groups[] = {32, 64, 128, 256, 1 << 30};
  std::printf("| model | group | bytes/weight | rel. error (spine) | worst matrix | its error |\n|---|---|---|---|---|---|\n");
  for (const std::string& dir : models) {
    const Checkpoint ck = open_checkpoint(dir);
    for (int G : groups) {
      double err = 0, norm = 0, worst = 0, bytes = 0, n = 0;
      std::string worst_name;
      std::vector<uint16_t> w;
      std::vector<float> out;
      for (const auto& [name, t] : ck.tensors) {
        if (t.dtype != DType::BF16 || t.shape.size() != 2 || t.shape[0] <= 1 || name == "model.embed_tokens.weight") continue;
        const int64_t rows = t.shape[0];
        const int cols = int(t.shape[1]);
        w.resize(size_t(rows) * size_t(cols));
        out.resize(size_t(cols));
        read_exact(ck.shard_paths[size_t(t.shard)], w.data(), t.nbytes, t.offset);
        double e = 0, s = 0;
        for (int64_t r = 0; r < rows; r++) {
          const uint16_t* row = w.data() + size_t(r) * size_t(cols);
          int8_roundtrip_row(row, cols, G, out.data());
          for (int c = 0; c < cols; c++) {
            const double v = bf16_to_f32(row[c]);
            e += (v - out[size_t(c)]) * (v - out[size_t(c)]);
            s += v * v;
          }
        }
        err += e;
        norm += s;
        if (s > 0 && std::sqrt(e / s) > worst) {
          worst = std::sqrt(e / s);
          worst_name = name;
        }
        const double g = double((cols + std::min(G, cols) - 1) / std::min(G, cols));
        bytes += double(rows) * (double(cols) + 4 * g);
        n += double(rows) * cols;
      }
      std::printf("| %s | %s | %.4f | %.5f | %s | %.5f |\n", dir.c_str(), G > (1 << 20) ? "row" : std::to_string(G).c_str(),
                  bytes / n, std::sqrt(err / norm), worst_name.c_str(), worst);
    }
  }
  return 0;
}
