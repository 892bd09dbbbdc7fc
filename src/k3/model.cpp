// k3/model.cpp — the whole K3 forward pass, top to bottom (spec §3.1).
//
// Per position the model carries P, the running partial sum, and B, the list
// of sealed blocks. A layer l:
//   a_in = B empty ? P : AttnRes(B ++ [P]; u_attn)
//   seal when l % block == 0: B += [P], and P restarts from the attention output
//   P    = (sealed ? 0 : P) + Attention(RMSNorm(a_in))      KDA or MLA
//   m_in = AttnRes(B ++ [P]; u_mlp)
//   P    = P + FFN(RMSNorm(m_in))                          dense (l < first_k) or latent MoE
// and at the end logits = lm_head · RMSNorm(AttnRes(B ++ [P]; u_out)).
#include "k3/model.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/bytes.h"
#include "base/error.h"
#include "base/memory_limit.h"
#include "base/numeric.h"
#include "base/read_fault.h"
#include "k3/layers.h"
#include "k3/placement.h"
#include "io/depth_profile.h"
#include "io/span_reader.h"
#include "io/stripe.h"

namespace sluice {

uint64_t working_bytes(const ModelConfig& c, int T, int logit_rows) {
  const uint64_t t = uint64_t(std::max(T, 1)), H = uint64_t(c.hidden_size), V = uint64_t(c.vocab_size);
  // forward(): P, mixed, normed, sub, the prefetch lookahead's estimate and
  // the sealed AttnRes blocks, [T][H] each.
  const uint64_t blocks = c.attn_res_block_size > 0 ? uint64_t(c.num_hidden_layers / c.attn_res_block_size + 1) : 1;
  uint64_t per_token = (6 + blocks) * H;
  // The largest sub-block's own buffers (k3/kda.cpp, mla.cpp, moe.cpp), per token.
  const uint64_t kda = 8ull * uint64_t(c.kda_dim()) + uint64_t(c.kda_num_heads);
  // K3.1 Pro's indexer (k3/dsa.cpp): queries, head weights, keys and the top-k
  // list per token; a query's score row is scratch of the context's length.
  const uint64_t dsa =
      c.dsa ? uint64_t(c.dsa_n_heads) * (c.dsa_head_dim + 1ull) + uint64_t(c.dsa_head_dim) + uint64_t(c.dsa_topk) : 0;
  const uint64_t mla = uint64_t(c.q_lora_rank) +
                       uint64_t(c.num_attention_heads) * (c.mla_q_head_dim() + 2ull * c.v_head_dim) +
                       uint64_t(c.kv_lora_rank + c.qk_rope_head_dim) + dsa;
  const uint64_t dense = 3ull * uint64_t(c.intermediate_size);
  const uint64_t moe = uint64_t(c.num_experts) + uint64_t(c.num_experts_per_token + 3) * c.routed_expert_hidden_size +
                       4ull * uint64_t(std::max(c.moe_intermediate_size, c.shared_intermediate())) + H;
  per_token += std::max({kda, mla, dense, moe});
  uint64_t bytes = t * per_token * sizeof(float);
  // A group of experts computed together (k3/moe.cpp) holds up to K rows of
  // inputs, gate, up and outputs even when the pass has fewer tokens.
  bytes += uint64_t(c.num_experts_per_token) *
           (2ull * c.routed_expert_hidden_size + 2ull * uint64_t(c.moe_intermediate_size)) * sizeof(float);
  bytes += uint64_t(std::max(logit_rows, 1)) * V * sizeof(float) * 2;  // logits, and a copy the caller keeps
  bytes += V * 160;        // the tokenizer's tables (text/tokenizer.h), about 100 bytes a rank
  bytes += 8ull << 20;     // allocator slack, thread stacks touched, small buffers
  return bytes;
}

constexpr int kMinContext = 256;
constexpr uint64_t kRingDepth = 512ull << 20;  // the default streaming ring's largest size
constexpr int kLongPassRows = 32;  // a pass of more rows is a prompt chunk (ExpertSource::long_pass)

namespace {

// Marks pieces resident within `room` bytes, spread evenly over the pass so
// that computing on resident pieces overlaps reading streamed ones; then fills
// what room is left, in pass order.
std::vector<bool> choose_resident_pieces(const Spine& spine, uint64_t room, uint64_t* used) {
  const int n = spine.piece_count();
  std::vector<bool> resident(size_t(n), false);
  uint64_t total = 0;
  for (int i = 0; i < n; i++) total += spine.piece_bytes(i);
  const double share = total ? double(room) / double(total) : 0.0;
  double credit = 0;
  *used = 0;
  for (int i = 0; i < n; i++) {
    const uint64_t b = spine.piece_bytes(i);
    credit += share * double(b);
    if (credit >= double(b) && *used + b <= room) {
      resident[size_t(i)] = true;
      *used += b;
      credit -= double(b);
    }
  }
  for (int i = 0; i < n; i++) {
    const uint64_t b = spine.piece_bytes(i);
    if (!resident[size_t(i)] && *used + b <= room) {
      resident[size_t(i)] = true;
      *used += b;
    }
  }
  return resident;
}

}  // namespace

MemoryPlan plan_memory(const Checkpoint& ck, const Spine& spine, const ModelOptions& opt) {
  const ModelConfig& c = ck.config;
  MemoryPlan p;
  p.budget = opt.ram_budget ? opt.ram_budget : default_ram_budget();
  p.fixed = spine.fixed_bytes() + 2ull * uint64_t(c.hidden_size) * sizeof(float);  // + final norm, u_out
  for (int i = 0; i < spine.piece_count(); i++) p.spine_total += spine.piece_bytes(i);
  const uint64_t min_ring = spine.min_ring_bytes();
  // Sequence state: KDA S + conv history (fixed), MLA latent cache per position.
  // (K3.1 Pro: plus the indexer keys, docs/k31-spec.md §5.)
  uint64_t kda = 0, mla_per_pos = c.cache_bytes_per_position();
  for (int l = 0; l < c.num_hidden_layers; l++)
    if (c.is_kda_layer(l))
      kda += (c.kda_state_floats() +
              3ull * uint64_t(std::max(c.kda_conv_kernel - 1, 0)) * c.kda_dim()) * sizeof(float);
  const uint64_t copies = 1 + uint64_t(std::max(opt.saved_states, 0));
  kda *= copies;
  mla_per_pos *= copies;
  const uint64_t slot = c.num_experts > 0 ? SpanReader::direct_capacity(c.expert_span_bytes()) : 0;
  const uint64_t min_buffers = 2 * slot;
  // The minimum holds state for a short context; the full max_context is reserved when it fits.
  const uint64_t min_state = kda + mla_per_pos * uint64_t(std::min(std::max(opt.max_context, 1), kMinContext));
  if (opt.whole_process) {
    p.baseline = resident_bytes();
    p.working = working_bytes(c, opt.chunk_tokens, opt.all_logits ? opt.chunk_tokens : opt.logit_rows) + opt.extra_bytes;
  }
  p.minimum = p.baseline + p.working + p.fixed + min_ring + min_buffers + min_state;
  if (p.budget < p.minimum)
    fail(ck.dir, "RAM budget of " + format_bytes(p.budget) + " is below this model's working minimum of " +
                     format_bytes(p.minimum) + " (" + (opt.whole_process ? "process baseline, working buffers, " : "") +
                     "streaming ring, expert buffers, state for " + std::to_string(kMinContext) +
                     " tokens); try --ram-budget " + size_flag_at_least(p.minimum + p.minimum / 50));
  uint64_t spare = p.budget - p.minimum;
  // One layer's reads in flight at once: every expert of a layer is read in parallel.
  p.expert_buffers = min_buffers + std::min(spare, uint64_t(std::max(c.num_experts_per_token - 2, 0)) * slot);
  spare -= p.expert_buffers - min_buffers;
  p.state_reserve = min_state + std::min(spare, mla_per_pos * uint64_t(std::max(opt.max_context - kMinContext, 0)));
  const uint64_t fixed = p.baseline + p.working + p.fixed + p.state_reserve + p.expert_buffers;
  p.spine_resident = fixed + p.spine_total <= p.budget;
  if (p.spine_resident) {
    p.resident_pieces.assign(size_t(spine.piece_count()), true);
    p.spine_resident_bytes = p.spine_total;
  } else {
    // Read-ahead depth beyond the minimum absorbs stalls in compute (a
    // layer's expert reads, the KDA recurrence) without idling the disk; an
    // eighth of the room, up to kRingDepth, and the rest holds spine pieces.
    const uint64_t room = p.budget - fixed;
    const uint64_t want = opt.spine_ring_bytes ? opt.spine_ring_bytes : std::min(room / 8, kRingDepth);
    p.ring = std::min(std::max(want, min_ring), room);
    p.resident_pieces = choose_resident_pieces(spine, p.budget - fixed - p.ring, &p.spine_resident_bytes);
  }
  p.spine_held = p.ring + p.spine_resident_bytes;
  p.expert_cache = p.budget - fixed - p.spine_held;
  return p;
}

bool pack_exists(const Checkpoint& ck, const std::string& spine) {
  const SpineFormat f = spine.empty() ? SpineFormat::lossless : parse_spine_format(spine);
  struct stat st;
  return f != SpineFormat::bf16 && ::stat(pack_path(ck.dir, f).c_str(), &st) == 0;
}

std::shared_ptr<const Pack> open_spine_pack(const Checkpoint& ck, const std::string& spine, const std::string& pack_file) {
  const SpineFormat f = spine.empty() ? SpineFormat::lossless : parse_spine_format(spine);
  if (f == SpineFormat::bf16) {
    if (!pack_file.empty()) fail(pack_file, "--spine bf16 reads the shards; a --spine-pack is for lossless or int8");
    return nullptr;
  }
  std::string path = pack_file;
  if (path.empty()) {
    path = pack_path(ck.dir, f);
    if (!pack_exists(ck, spine.empty() ? "lossless" : spine)) {
      if (spine.empty()) return nullptr;
      fail(path, std::string("no ") + spine + " pack here; run `sluice pack --model " + ck.dir + " --spine " + spine + "`");
    }
  } else {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      fail(path, std::string("no such pack; run `sluice pack --model ") + ck.dir + " --spine " + spine_format_name(f) +
                     " --out " + path + "`");
  }
  auto pack = std::make_shared<const Pack>(open_pack(path, ck));
  if (pack->format != f) fail(path, std::string("holds a ") + spine_format_name(pack->format) + " spine, not " + spine_format_name(f));
  return pack;
}

std::unique_ptr<K3Model> open_k3_model(const std::string& dir, const ModelOptions& opt) {
  auto m = std::make_unique<K3Model>();
  m->ck = open_checkpoint(dir, {.allow_unknown = opt.allow_unknown});
  if (opt.on_warning)
    for (const std::string& f : m->ck.ignored_features) opt.on_warning(ignored_feature_warning(dir, f));
  m->globals = load_global_weights(m->ck);
  m->backend = opt.backend ? opt.backend : &cpu_backend();
  std::shared_ptr<const Pack> pack = open_spine_pack(m->ck, opt.spine, opt.spine_pack);
  // After the spine pack's binding check (the stripe's files join the shard
  // list), before the spine takes its tensors' places (--spine stripes).
  StripeUse stripe;
  if (!opt.no_stripe) stripe = apply_stripe(m->ck, /*spine=*/!pack);
  else if (stripe_moved(dir))
    fail("--no-stripe", "the routed experts of " + dir + " were moved to the drives of its stripe (stripe --move): the shards no "
                        "longer hold them");
  for (const std::string& w : stripe.warnings)
    if (opt.on_warning) opt.on_warning(w);
  m->spine = std::make_unique<Spine>(m->ck, opt.spine_chunk_bytes, std::move(pack), m->backend);
  m->plan = plan_memory(m->ck, *m->spine, opt);
  if (opt.on_plan) opt.on_plan(m->plan);
  const bool pin_spine = opt.on_placement && opt.on_placement(placement_request(m->ck, *m->spine, m->plan));
  m->queue_depth = opt.queue_depth > 0 ? opt.queue_depth : default_queue_depth(dir);
  m->reader_depth = reader_queue_depth(m->queue_depth, !m->plan.spine_resident);
  // One queue per drive of a stripe, at that drive's own depth, in the
  // expert reader and the spine's (its streamed and resident reads).
  std::vector<int> drive_depths;
  for (const std::string& drive : stripe.drives)
    drive_depths.push_back(opt.queue_depth > 0 ? opt.queue_depth : default_queue_depth(drive));
  SpanReaderOptions io;
  io.queue_depth = m->reader_depth;
  io.device_depths = drive_depths;
  io.file_devices = stripe.file_devices;
  // A moved stripe holds every expert on its drives: nothing is missing
  // (setup --drives leaves a stream manifest until it has checked them).
  std::unique_ptr<ExpertSource> filler = opt.miss_filler && !stripe.moved ? opt.miss_filler(m->ck) : nullptr;
  if (!filler && (opt.pread_experts || m->ck.config.num_experts == 0)) {
    m->experts = make_pread_expert_source(m->ck);
  } else {
    DirectSourceOptions d;
    d.cache_bytes = m->plan.expert_cache;
    d.inflight_bytes = m->plan.expert_buffers;
    d.queue_depth = io.queue_depth;
    d.file_devices = stripe.file_devices;
    d.shard_spans = stripe.shard_spans;  // a failing drive's experts: read from the shards
    d.shards_moved = stripe.moved;       // (unless moved off them: then from other copies only)
    d.copy_spans = stripe.copy_spans;    // --copies: each read from the drive holding it that finishes first
    d.device_weights = stripe.drive_weights;
    d.on_warning = opt.on_warning;
    d.device_depths = drive_depths;
    d.host_memory = {m->backend->register_host, m->backend->unregister_host};  // a GPU entry pins them
    m->experts = make_direct_expert_source(m->ck, d, std::move(filler));
  }
  // After the expert source: its helper faults the cache's memory in while the spine loads.
  m->spine->start(m->plan.resident_pieces, m->plan.ring, io, opt.load_progress);
  if (pin_spine) m->spine->pin_resident();
  m->spine->set_between_matrices([e = m->experts.get()] { e->pump(); });
  return m;
}

namespace {


// Prefetch guesses for MoE layer n: the experts the previous token chose
// there, plus layer n's router (always resident) applied to estimates of its
// FFN input as they become available ("lookahead": the residual stream changes
// little between adjacent layers). An estimate adds the first `per_row` of
// each row's top-k (in descending score); the new guesses are hinted at once
// (ExpertSource::prefetch) and start behind the reads a fetch waits for.
// `replace`: this estimate is the best there will be before the layer's
// router runs, so the earlier guesses it does not confirm are withdrawn (not
// started) or cut short (under way): they are mostly wrong and their reads
// would only compete with needed ones.
void add_lookahead(K3Model& m, int n, const float* y, int rows, int per_row, bool replace) {
  const ModelConfig& c = m.config();
  const int E = c.num_experts, K = c.num_experts_per_token;
  Prefetcher& p = m.prefetcher;
  std::vector<int>& g = p.guess[size_t(n)];
  std::vector<float> logits(size_t(rows) * E), wts(size_t(rows) * K);
  std::vector<int> ids(size_t(rows) * K), added, mine;
  const Backend& be = *m.backend;
  be.matmul_bf16(m.spine->resident(m.spine->router(n)), y, rows, logits.data());
  be.route(logits.data(), m.spine->vec(m.spine->router_bias(n)), rows, E, K, 1.0f, ids.data(), wts.data());
  per_row = std::clamp(per_row, 0, K);
  for (int r = 0; r < rows; r++) {
    for (int e : std::span<const int>(ids).subspan(size_t(r) * K, size_t(per_row))) {
      mine.push_back(e);
      if (!std::binary_search(g.begin(), g.end(), e) &&
          std::find(added.begin(), added.end(), e) == added.end())
        added.push_back(e);
    }
  }
  if (replace) {
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    m.experts->withdraw(n, mine);
    g = mine;
  } else {
    g.insert(g.end(), added.begin(), added.end());
    std::sort(g.begin(), g.end());
  }
  m.experts->prefetch(n, added);
}

// Starts layer n's guess: the previous token's route there.
void start_guess(K3Model& m, int n) {
  const ModelConfig& c = m.config();
  Prefetcher& p = m.prefetcher;
  p.guess.resize(size_t(c.num_hidden_layers));
  p.last_route.resize(size_t(c.num_hidden_layers));
  std::vector<int>& g = p.guess[size_t(n)];
  g = p.last_route[size_t(n)];
  std::sort(g.begin(), g.end());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  m.experts->prefetch(n, g);
}

// Recall of the guess made for layer l, and the route the next token's guess reuses.
void score_guess(K3Model& m, int l, const std::vector<int>& chosen, int T) {
  const ModelConfig& c = m.config();
  Prefetcher& p = m.prefetcher;
  const int K = c.num_experts_per_token;
  p.last_route.resize(size_t(c.num_hidden_layers));
  p.guess.resize(size_t(c.num_hidden_layers));
  p.needed.resize(size_t(c.num_hidden_layers));
  p.guessed.resize(size_t(c.num_hidden_layers));
  p.guesses.resize(size_t(c.num_hidden_layers));
  p.last_route[size_t(l)].assign(chosen.end() - K, chosen.end());
  if (T != 1) return;  // recall is a decode-step figure
  const std::vector<int>& g = p.guess[size_t(l)];
  p.guesses[size_t(l)] += g.size();
  for (int e : p.last_route[size_t(l)]) {
    p.needed[size_t(l)]++;
    if (std::binary_search(g.begin(), g.end(), e)) p.guessed[size_t(l)]++;
  }
}

void forward_pass(K3Model& m, std::span<const SequenceRows> seqs, Logits which, std::vector<float>* logits,
                  ForwardTrace* trace);

}  // namespace

void forward(K3Model& m, SequenceState& st, std::span<const int> tokens, Logits which, std::vector<float>* logits,
             ForwardTrace* trace, ChunkUndo* undo) {
  const SequenceRows one[1] = {{&st, tokens, undo}};
  forward_rows(m, one, which, logits, trace);
}

void forward_rows(K3Model& m, std::span<const SequenceRows> seqs, Logits which, std::vector<float>* logits,
                  ForwardTrace* trace) {
  forward_pass(m, seqs, which, logits, trace);
  note_reads_ok();  // every weight this pass needed was read: /health is ok again after read failures
}

namespace {

// Every sequence's tokens in order, each checked against the vocabulary;
// *lens gets each sequence's count.
std::vector<int> pass_tokens(std::span<const SequenceRows> seqs, int V, std::vector<int>* lens) {
  std::vector<int> tokens;
  for (const SequenceRows& q : seqs) {
    if (q.tokens.empty()) fail("forward", "no tokens");
    tokens.insert(tokens.end(), q.tokens.begin(), q.tokens.end());
    lens->push_back(int(q.tokens.size()));
  }
  for (int tok : tokens)
    if (tok < 0 || tok >= V) fail("forward", "token id " + std::to_string(tok) + " is outside the vocabulary");
  return tokens;
}

// A prompt chunk (decode passes carry a token and its drafts per sequence):
// the expert source's background work waits until it is done.
struct LongPass {
  ExpertSource* src;
  explicit LongPass(ExpertSource* s) : src(s) {
    if (src) src->long_pass(true);
  }
  ~LongPass() {
    if (src) src->long_pass(false);
  }
};

// Each undo records where its chunk starts, for rollback().
void begin_undo(std::span<const SequenceRows> seqs, const ModelConfig& c) {
  for (const SequenceRows& q : seqs)
    if (q.undo) {
      q.undo->pos0 = q.state->pos;
      q.undo->T = int(q.tokens.size());
      q.undo->kda.resize(size_t(c.num_hidden_layers));
    }
}

// The embedding rows of `tokens`, [T][H], read from disk.
std::vector<float> embed(K3Model& m, const std::vector<int>& tokens) {
  const int H = m.config().hidden_size, T = int(tokens.size());
  std::vector<float> P(size_t(T) * H);
  std::vector<uint16_t> row(static_cast<size_t>(H));
  for (int t = 0; t < T; t++) {
    read_bf16_rows(m.ck, m.globals.embed, tokens[t], 1, row.data());
    for (int i = 0; i < H; i++) P[size_t(t) * H + i] = bf16_to_f32(row[size_t(i)]);
  }
  m.globals_bytes_read += uint64_t(T) * H * 2;
  return P;
}

// The residual stream (AttnRes): the sealed blocks B, each [T][H], and the
// block being summed, P.
struct Residual {
  K3Model& m;
  int T, H;
  std::vector<float> P;
  std::vector<std::vector<float>> blocks;
  std::vector<const float*> sources;

  // AttnRes over B ++ [P] for rows first..first+count-1 (all from first by default), written from out[0].
  void mix(const std::vector<float>& u, float* out, int first = 0, int count = -1) {
    sources.clear();
    for (const auto& b : blocks) sources.push_back(b.data() + size_t(first) * H);
    sources.push_back(P.data() + size_t(first) * H);
    m.backend->attn_res(sources.data(), int(sources.size()), m.spine->vec(u), count < 0 ? T - first : count, H,
                        m.config().rms_norm_eps, out);
  }
};

// Layer l's attention over every sequence's rows: KDA or MLA, each sequence
// with its own state.
void attention_rows(K3Model& m, int l, const LayerWeights& w, std::span<const SequenceRows> seqs,
                    const std::vector<int>& lens, const float* normed, float* out) {
  const ModelConfig& c = m.config();
  if (c.is_kda_layer(l)) {
    std::vector<KdaLayerState*> states(seqs.size());
    std::vector<KdaUndo*> undos(seqs.size());
    for (size_t i = 0; i < seqs.size(); i++) {
      states[i] = &seqs[i].state->kda[size_t(l)];
      undos[i] = seqs[i].undo ? &seqs[i].undo->kda[size_t(l)] : nullptr;
    }
    kda_forward_rows(c, *m.spine, w.kda, states, lens, undos, normed, out);
  } else {
    std::vector<MlaLayerCache*> caches(seqs.size());
    for (size_t i = 0; i < seqs.size(); i++) caches[i] = &seqs[i].state->mla[size_t(l)];
    mla_forward_rows(c, *m.spine, w.mla, caches, lens, normed, out);
  }
}

// The head: final norm and output matrix over the rows whose logits are
// wanted: all, or each sequence's last (a last_only one's under All), packed
// in order. Rows are independent here. `mixed` and `normed` are [T][H] scratch.
void head_logits(K3Model& m, Residual& r, std::span<const SequenceRows> seqs, const std::vector<int>& lens,
                 Logits which, std::vector<float>& mixed, std::vector<float>& normed, std::vector<float>* logits) {
  const ModelConfig& c = m.config();
  const int H = c.hidden_size;
  // Consecutive wanted rows go through one mix() call.
  int n = 0, run_from = 0, run_len = 0, first = 0;
  auto flush = [&] {
    if (run_len) r.mix(m.globals.u_out, mixed.data() + size_t(n) * H, run_from, run_len);
    n += run_len;
    run_len = 0;
  };
  for (size_t i = 0; i < seqs.size(); i++) {
    const int len = lens[i];
    const int want = which == Logits::All && !seqs[i].last_only ? len : 1;
    if (run_from + run_len != first + len - want) {
      flush();
      run_from = first + len - want;
    }
    run_len += want;
    first += len;
  }
  flush();
  m.backend->rmsnorm_rows(mixed.data(), H, m.spine->vec(m.globals.final_norm), n, H, c.rms_norm_eps, normed.data(),
                          H);
  logits->resize(size_t(n) * c.vocab_size);
  m.spine->matmul(m.spine->head(), normed.data(), n, logits->data());
}

void forward_pass(K3Model& m, std::span<const SequenceRows> seqs, Logits which, std::vector<float>* logits,
                  ForwardTrace* trace) {
  const ModelConfig& c = m.config();
  const int H = c.hidden_size;
  const Backend& be = *m.backend;
  const float eps = c.rms_norm_eps;
  std::vector<int> lens;
  const std::vector<int> tokens = pass_tokens(seqs, c.vocab_size, &lens);
  const int T = int(tokens.size());
  const size_t TH = size_t(T) * H;
  LongPass long_pass(T > kLongPassRows && m.experts ? m.experts.get() : nullptr);
  m.spine->begin_pass(which != Logits::None && logits);
  begin_undo(seqs, c);

  // P starts as the embedding rows.
  Residual r{m, T, H, embed(m, tokens), {}, {}};
  std::vector<float> mixed(TH), normed(TH), sub(TH);
  if (trace) {
    trace->hidden.assign(size_t(c.num_hidden_layers) * TH, 0.0f);
    trace->experts.clear();
  }
  // Layer n's FFN input as it would be from P now (layer n's attention still
  // missing): its router applied to that is the lookahead for layer n.
  std::vector<float> ahead(TH);
  const int K = c.num_experts_per_token;
  auto look_ahead = [&](int n, bool replace) {
    if (n >= c.num_hidden_layers || !c.is_moe_layer(n) || !m.experts) return;
    const LayerWeights& f = m.spine->ffn(n);
    r.mix(f.u_mlp, ahead.data());
    be.rmsnorm_rows(ahead.data(), H, m.spine->vec(f.post_norm), T, H, eps, ahead.data(), H);
    add_lookahead(m, n, ahead.data(), T, K, replace);
  };
  int first_moe = 0, last_moe = c.num_hidden_layers - 1;
  while (first_moe < c.num_hidden_layers && !c.is_moe_layer(first_moe)) first_moe++;
  while (last_moe >= 0 && !c.is_moe_layer(last_moe)) last_moe--;
  if (first_moe < c.num_hidden_layers) {
    start_guess(m, first_moe);
    look_ahead(first_moe, false);  // from the embedding alone: too rough to overrule the previous route
  }

  for (int l = 0; l < c.num_hidden_layers; l++) {
    // Attention sub-block.
    const LayerWeights& w = m.spine->attention(l);
    if (r.blocks.empty()) mixed = r.P;
    else r.mix(w.u_attn, mixed.data());
    const bool seal = l % c.attn_res_block_size == 0;
    be.rmsnorm_rows(mixed.data(), H, m.spine->vec(w.input_norm), T, H, eps, normed.data(), H);
    attention_rows(m, l, w, seqs, lens, normed.data(), sub.data());
    if (seal) {
      r.blocks.push_back(r.P);
      r.P = sub;
    } else {
      be.add(r.P.data(), sub.data(), TH);
    }
    // FFN sub-block.
    const LayerWeights& f = m.spine->ffn(l);
    r.mix(f.u_mlp, mixed.data());
    be.rmsnorm_rows(mixed.data(), H, m.spine->vec(f.post_norm), T, H, eps, normed.data(), H);
    if (c.is_moe_layer(l)) {
      if (l + 1 < c.num_hidden_layers && c.is_moe_layer(l + 1)) {
        start_guess(m, l + 1);
        // Layer l's FFN input: the earliest estimate. A decode step guesses
        // only its surest few here (most of the rest were wrong and read for
        // nothing); a chunk's rows all of theirs (their union is most of the
        // next layer's need, and its reads have a whole layer to land).
        const int early = m.prefetcher.early_per_row;
        add_lookahead(m, l + 1, normed.data(), T, T > 1 || early < 0 ? K : early, false);
      } else if (l == last_moe) {
        // The next pass's first MoE layer: this pass's route there, read
        // while this layer, the head and the next pass's first layers
        // compute, so the drives do not sit idle across the token boundary.
        start_guess(m, first_moe);
        // And the rest of the next pass's layers (their routes this pass),
        // read only by a drive of a stripe that has nothing else to do.
        for (int n = first_moe + 1; n < last_moe; n++)
          if (c.is_moe_layer(n)) m.experts->prefetch_when_idle(n, m.prefetcher.last_route[size_t(n)]);
      }
      std::vector<int> chosen;
      moe_forward(c, *m.spine, f.moe, l, *m.experts, normed.data(), T, sub.data(), &chosen);
      score_guess(m, l, chosen, T);
      if (trace) trace->experts.insert(trace->experts.end(), chosen.begin(), chosen.end());
    } else {
      dense_forward(c, *m.spine, f.dense, normed.data(), T, sub.data());
    }
    be.add(r.P.data(), sub.data(), TH);
    if (trace) std::copy(r.P.begin(), r.P.end(), trace->hidden.begin() + ptrdiff_t(size_t(l) * TH));
    look_ahead(l + 1, m.prefetcher.replace);  // a better estimate, read while layer l+1's attention computes
    m.experts->pump();
  }
  for (const SequenceRows& q : seqs) q.state->pos += int64_t(q.tokens.size());

  if (which == Logits::None || !logits) return;
  head_logits(m, r, seqs, lens, which, mixed, normed, logits);
}

}  // namespace

void rollback(K3Model& m, SequenceState& st, ChunkUndo& undo, int keep) {
  const ModelConfig& c = m.config();
  if (undo.T == 0 || st.pos != undo.pos0 + undo.T) fail("rollback", "the state has moved since the recorded chunk");
  if (keep < 0 || keep > undo.T) fail("rollback", "keep " + std::to_string(keep) + " is outside the chunk");
  if (keep < undo.T) {
    const int64_t drop = undo.T - keep;
    for (int l = 0; l < c.num_hidden_layers; l++) {
      if (c.is_kda_layer(l)) {
        kda_rollback(*m.backend, m.spine->owner(), c, m.spine->attention(l).kda, st.kda[size_t(l)], undo.kda[size_t(l)],
                     keep);
      } else {
        MlaLayerCache& mc = st.mla[size_t(l)];
        const size_t width = mc.len ? mc.kv.size() / size_t(mc.len) : 0;
        const size_t idx_width = mc.len ? mc.idx.size() / size_t(mc.len) : 0;  // 0 without an indexer
        mc.len -= drop;
        mc.kv.resize(size_t(mc.len) * width);
        mc.idx.resize(size_t(mc.len) * idx_width);
      }
    }
    st.pos = undo.pos0 + keep;
  }
  undo.T = 0;
}

}  // namespace sluice
