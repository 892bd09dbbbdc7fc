// bench/rollback.cpp — what cutting back a verify chunk costs at K3 dimensions
// (build/bench_rollback). Speculative verification (engine/generate.cpp) feeds
// 1 + k positions and keeps a prefix; the MLA caches are just truncated, the
// KDA layers replay the recurrence for the kept positions from the state the
// chunk started with (kept without a copy: k3/kda.cpp). Printed beside it: a
// plain copy of one layer's state (what a snapshot/restore would cost), per
// KDA layer and for K3's 69 KDA layers. Times are CPU time of this thread.
//
//   bench_rollback [--heads 96] [--dim 128] [--chunk 9] [--reps 20]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/splitmix.h"
#include "k3/layers.h"

using namespace sluice;

namespace {

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void fill(std::vector<float>& v, size_t n, uint64_t& seed, float scale) {
  v.resize(n);
  for (float& x : v) x = scale * (float(splitmix64(seed) >> 40) / float(1 << 24) - 0.5f);
}

}  // namespace

int main(int argc, char** argv) {
  ModelConfig c;
  c.kda_num_heads = 96;
  c.kda_head_dim = 128;
  c.kda_conv_kernel = 4;
  int chunk = 9, reps = 20;
  const int kda_layers = 69;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--heads") c.kda_num_heads = v;
    else if (a == "--dim") c.kda_head_dim = v;
    else if (a == "--chunk") chunk = v;
    else if (a == "--reps") reps = v;
  }
  const int NH = c.kda_num_heads, D = c.kda_head_dim, C = NH * D, K = c.kda_conv_kernel;
  uint64_t seed = 1;
  KdaWeights w;
  fill(w.q_conv, size_t(C) * K, seed, 1.0f);
  fill(w.k_conv, size_t(C) * K, seed, 1.0f);
  fill(w.v_conv, size_t(C) * K, seed, 1.0f);
  fill(w.a, size_t(NH), seed, 1.0f);
  fill(w.dt_bias, size_t(C), seed, 1.0f);
  fill(w.o_norm, size_t(D), seed, 1.0f);
  KdaLayerState st;
  fill(st.S, size_t(NH) * D * D, seed, 0.1f);
  fill(st.conv, 3 * size_t(K - 1) * C, seed, 0.1f);
  KdaUndo u;
  u.S = st.S;
  u.conv = st.conv;
  fill(u.q, size_t(chunk) * C, seed, 1.0f);
  fill(u.k, size_t(chunk) * C, seed, 1.0f);
  fill(u.v, size_t(chunk) * C, seed, 1.0f);
  fill(u.f, size_t(chunk) * C, seed, 1.0f);
  fill(u.beta, size_t(chunk) * NH, seed, 1.0f);
  const double state_mb = double((st.S.size() + st.conv.size()) * sizeof(float)) / 1e6;
  std::printf("KDA layer state: %d heads x %d^2 + conv = %.2f MB (x %d layers = %.0f MB)\n", NH, D, state_mb,
              kda_layers, state_mb * kda_layers);

  std::vector<float> copy_S(st.S.size()), copy_conv(st.conv.size());
  double t0 = cpu_now();
  for (int r = 0; r < reps; r++) {
    std::memcpy(copy_S.data(), st.S.data(), st.S.size() * sizeof(float));
    std::memcpy(copy_conv.data(), st.conv.data(), st.conv.size() * sizeof(float));
  }
  const double copy_s = (cpu_now() - t0) / reps;
  std::printf("copy of one layer's state: %.3f ms (K3, %d layers: %.1f ms)\n", copy_s * 1e3, kda_layers,
              copy_s * 1e3 * kda_layers);
  for (int keep = 0; keep < chunk; keep++) {
    t0 = cpu_now();
    for (int r = 0; r < reps; r++) kda_rollback(cpu_backend(), 0, c, w, st, u, keep);
    const double s = (cpu_now() - t0) / reps;
    std::printf("rollback keeping %d of %d: %.3f ms per layer (K3, %d layers: %.1f ms)\n", keep, chunk, s * 1e3,
                kda_layers, s * 1e3 * kda_layers);
  }
  return 0;
}
