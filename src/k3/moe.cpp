// Latent MoE (spec §3.6) and the dense SiTU FFN (§3.5).
//
// Router in FP32: s = σ(W_r y), selection by s + bias (bias for selection
// only), weights = the chosen unbiased s renormalized. Routed experts compute
// in the latent space ℓ = W_rdown y; their outputs are combined per token in
// ascending expert id (a fixed order, so results never depend on the order in
// which expert bytes arrive), then RMSNorm'ed, projected up, and added to the
// shared experts' output. A chunk reads each needed expert once and runs all
// of its tokens through it (expert-major).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "k3/layers.h"

namespace sluice {

namespace {

// out = down · SiTU(gate · y, up · y) for T rows.
void situ_mlp(const ModelConfig& c, Spine& sp, const Bf16Matrix& gate, const Bf16Matrix& up, const Bf16Matrix& down,
              const float* y, int T, float* out) {
  const int I = gate.rows;
  std::vector<float> g(size_t(T) * I), u(size_t(T) * I);
  sp.matmul(gate, y, T, g.data());
  sp.matmul(up, y, T, u.data());
  sp.backend().situ_glu(g.data(), u.data(), size_t(T) * I, c.situ_beta, c.situ_linear_beta, g.data());
  sp.matmul(down, g.data(), T, out);
}

}  // namespace

void dense_forward(const ModelConfig& c, Spine& sp, const DenseWeights& w, const float* y, int T, float* out) {
  situ_mlp(c, sp, w.gate, w.up, w.down, y, T, out);
}

void moe_forward(const ModelConfig& c, Spine& sp, const MoeWeights& w, int layer, ExpertSource& experts, const float* y, int T,
                 float* out, std::vector<int>* chosen) {
  const int H = c.hidden_size, E = c.num_experts, K = c.num_experts_per_token;
  const int LAT = c.routed_expert_hidden_size, I = c.moe_intermediate_size;
  const Backend& be = sp.backend();

  // Router, selection, weights.
  std::vector<float> logits(size_t(T) * E);
  sp.matmul(w.router, y, T, logits.data());
  std::vector<int> ids(size_t(T) * K);
  std::vector<float> weights(size_t(T) * K);
  be.route(logits.data(), sp.vec(w.bias), T, E, K, c.routed_scaling_factor, ids.data(), weights.data());
  if (chosen) *chosen = ids;

  std::vector<float> lat(size_t(T) * LAT);
  sp.matmul(w.rdown, y, T, lat.data());

  // Expert-major: which (token, slot) pairs each needed expert serves.
  std::map<int, std::vector<int>> users;  // expert -> t*K + slot, ascending expert id
  for (int i = 0; i < T * K; i++) users[ids[size_t(i)]].push_back(i);
  std::vector<int> needed;
  for (const auto& [e, _] : users) needed.push_back(e);

  std::vector<float> expert_out(size_t(T) * K * LAT);  // [t][slot][LAT]
  const ExpertLayout lay = expert_layout(c);
  std::vector<float> xin, g, u, o;
  // The shared experts need no routed expert's bytes: they compute while the
  // fetch would wait for reads (their own sum, added last as before: same bits).
  std::vector<float> sh;
  const auto shared = [&] {
    if (c.num_shared_experts <= 0) return;
    sh.resize(size_t(T) * H);
    situ_mlp(c, sp, w.sh_gate, w.sh_up, w.sh_down, y, T, sh.data());
  };
  // Experts whose bytes are here together compute together: every gate and
  // up of a group in one grouped call, one SiTU-GLU, every down in one (a GPU:
  // two launches for the group instead of two per expert). Grouped products
  // are bitwise the one-by-one ones, so the bits do not depend on how the
  // source batches. A group holds at most max(K, one expert's) rows, so its
  // buffers stay within working_bytes() (a decode step's 16 experts: one group).
  std::vector<Mxfp4Task> gate_up, down;
  std::vector<size_t> row0;  // each group member's first row in xin/g/u/o
  const auto compute = [&](std::span<const ExpertBytes> group) {
    size_t rows = 0;
    row0.clear();
    for (const ExpertBytes& b : group) {
      row0.push_back(rows);
      rows += users[needed[b.i]].size();
    }
    xin.resize(rows * LAT);
    g.resize(rows * I);
    u.resize(rows * I);
    o.resize(rows * LAT);
    gate_up.clear();
    down.clear();
    for (size_t k = 0; k < group.size(); k++) {
      const std::vector<int>& who = users[needed[group[k].i]];
      const int n = int(who.size());
      float *x = xin.data() + row0[k] * LAT, *gk = g.data() + row0[k] * I, *uk = u.data() + row0[k] * I;
      for (int r = 0; r < n; r++) std::copy_n(lat.data() + size_t(who[size_t(r)] / K) * LAT, LAT, x + size_t(r) * LAT);
      // Expert bytes are valid for this callback only: transient (owner 0),
      // but keyed by (layer, expert, projection) under the spine's owner: the
      // same key always has the same bytes (kernels/backend.h, content keys).
      const uint8_t* span = group[k].span;
      const uint32_t item = (uint32_t(layer) * uint32_t(E) + uint32_t(needed[group[k].i])) * 3 + 1;
      gate_up.push_back({{span + lay.w1_packed, span + lay.w1_scale, I, LAT, 0, content_key(sp.owner(), item)}, x, gk, n});
      gate_up.push_back(
          {{span + lay.w3_packed, span + lay.w3_scale, I, LAT, 0, content_key(sp.owner(), item + 1)}, x, uk, n});
      down.push_back({{span + lay.w2_packed, span + lay.w2_scale, LAT, I, 0, content_key(sp.owner(), item + 2)}, gk,
                      o.data() + row0[k] * LAT, n});
    }
    // pump(): reads land and the next ones start while this group computes.
    be.grouped_mxfp4(gate_up.data(), int(gate_up.size()));
    experts.pump();
    be.situ_glu(g.data(), u.data(), rows * I, c.situ_beta, c.situ_linear_beta, g.data());
    be.grouped_mxfp4(down.data(), int(down.size()));
    experts.pump();
    for (size_t k = 0; k < group.size(); k++) {
      const std::vector<int>& who = users[needed[group[k].i]];
      for (size_t r = 0; r < who.size(); r++)
        std::copy_n(o.data() + (row0[k] + r) * LAT, LAT, expert_out.data() + size_t(who[r]) * LAT);
    }
  };
  experts.fetch_batches(layer, needed, [&](std::span<const ExpertBytes> batch) {
    const size_t cap = size_t(K);
    size_t from = 0, rows = 0;
    for (size_t k = 0; k < batch.size(); k++) {
      const size_t n = users[needed[batch[k].i]].size();
      if (k > from && rows + n > cap) {
        compute(batch.subspan(from, k - from));
        from = k, rows = 0;
      }
      rows += n;
    }
    if (from < batch.size()) compute(batch.subspan(from));
  }, shared);

  // Combine in ascending expert id, latent norm, up projection.
  std::vector<float> comb(size_t(T) * LAT);
  be.moe_combine(expert_out.data(), ids.data(), weights.data(), T, K, LAT, comb.data());
  be.rmsnorm_rows(comb.data(), LAT, sp.vec(w.rnorm), T, LAT, c.rms_norm_eps, comb.data(), LAT);
  sp.matmul(w.rup, comb.data(), T, out);

  if (c.num_shared_experts > 0) be.add(out, sh.data(), sh.size());
}

}  // namespace sluice
