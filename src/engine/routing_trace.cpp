#include "engine/routing_trace.h"

#include <algorithm>

#include "base/error.h"

namespace sluice {

RoutingTrace routing_trace(Model& m, std::span<const int> tokens, int ctx,
                           const std::function<void(size_t done, size_t total)>& progress) {
  const ModelConfig& c = m.config();
  if (ctx < 1) fail("routing trace", "--ctx must be at least 1");
  if (c.num_experts == 0) fail("routing trace", "the model has no routed experts");
  RoutingTrace tr;
  tr.layers = c.num_hidden_layers - c.first_k_dense_replace;
  tr.experts_per_layer = c.num_experts;
  tr.top_k = c.num_experts_per_token;
  const size_t L = size_t(tr.layers), K = size_t(tr.top_k);
  tr.experts.resize(tokens.size() * L * K);
  ModelState st = m.new_state();
  if (progress) progress(0, tokens.size());  // said at once: the first piece may take a while
  for (size_t at = 0; at < tokens.size();) {
    if (at % size_t(ctx) == 0) st = m.new_state();  // a fresh sequence per chunk
    const size_t T = std::min({kRoutingTracePiece, size_t(ctx) - at % size_t(ctx), tokens.size() - at});
    ForwardTrace ft;
    m.forward(st, tokens.subspan(at, T), Logits::None, nullptr, &ft);
    // ForwardTrace: [layer][t][k]; the trace: [token][layer][k].
    for (size_t l = 0; l < L; l++)
      for (size_t t = 0; t < T; t++)
        std::copy_n(ft.experts.begin() + ptrdiff_t((l * T + t) * K), K,
                    tr.experts.begin() + ptrdiff_t(((at + t) * L + l) * K));
    at += T;
    if (progress) progress(at, tokens.size());
  }
  return tr;
}

}  // namespace sluice
