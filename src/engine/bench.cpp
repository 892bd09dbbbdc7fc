// engine/bench.cpp — prefill, decode steps, and after each step a replay of its
// reads with no compute: the floor that step could have reached on this disk,
// measured seconds away from it (these disks swing 2-3x within a minute).
#include "engine/bench.h"
#include "engine/bench_drives.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <random>
#include <thread>

#include "arch/open.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/stats.h"
#include "engine/compute_profile.h"
#include "engine/session.h"
#include "checkpoint/config.h"
#include "hub/http_experts.h"
#include "io/bandwidth_probe.h"
#include "kernels/device.h"
#include "kernels/fast.h"
#include "kernels/threads.h"
#include "model/dense_reads.h"
#include "model/prefetcher.h"

namespace sluice {

namespace {

// CPU seconds this process has used (all threads, user + system).
double cpu_s() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// What one decode step did.
struct StepRecord {
  double seconds = 0;
  uint64_t spine = 0, expert = 0, hit = 0;  // bytes: streamed spine, experts read, experts from cache
  double loader_idle = 0, compute_wait = 0;
  double expert_depth = 0;              // mean expert reads in flight over the step
  double expert_idle = 0;               // time the expert reader had nothing in flight
  double compute = 0;                   // time not spent waiting for expert reads or spine pieces
  std::vector<double> idle_before_layer;  // expert reader idle before each layer's fetch, seconds
  uint64_t wasted = 0;                  // bytes of guesses read that their layer did not need
  double boundary = 0;                  // the token boundary: before the first MoE fetch, after the last
  // On a GPU entry: weight bytes copied host -> device, read by the GPU's
  // products (HBM), and VRAM expert tier hits / misses.
  uint64_t h2d = 0, hbm = 0, tier_hits = 0, tier_misses = 0;
  uint64_t gpu_calls = 0;   // GPU product calls in the step
  double gpu_call_s = 0;    // host time inside them (the rest: the CPU's ops and the engine)
  GpuCallTimes gpu_times;   // the same by kind of call, and their waits
  uint64_t bytes() const { return spine + expert; }
};

// A replay: the step's reads in the step's order with nothing computed. One
// spine pass through the spine's own stream (its loader, ring and queue depth);
// as the pass reaches layer l's FFN part, that layer's expert spans are
// submitted together into buffers faulted in beforehand (as the expert source
// does) and waited for before the pass goes on. Nothing the engine keeps
// (expert cache, sequence state, prefetch history) is touched.
struct ReplayRecord {
  double seconds = 0;
  uint64_t bytes = 0;
  double gbps() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0; }
};

class Replayer {
 public:
  // The buffers are faulted in here, not while a replay is timed (the expert
  // source's are long since faulted in when a step reads into them).
  Replayer(Model& m, const SpanReaderOptions& io) : m_(m), reader_(m.checkpoint().shard_paths, io) {
    const ModelConfig& c = m.config();
    // An untimed read of one layer's worth of experts grows the pool to what a
    // replay uses (a model may have no MoE layer at all: one dense layer).
    int first_moe = 0;
    while (first_moe < c.num_hidden_layers && !c.is_moe_layer(first_moe)) first_moe++;
    if (c.num_experts == 0 || size_t(first_moe) >= m.checkpoint().experts.size()) return;
    const std::vector<FileSpan>& layer = m.checkpoint().experts[size_t(first_moe)];
    size_t i = 0;
    read_spans(reader_, c.expert_span_bytes(), [&](FileSpan* s) {
      if (i == layer.size() || i == size_t(c.num_experts_per_token)) return false;
      *s = layer[i];
      i++;
      return true;
    }, &pool_);
  }

  ReplayRecord run(const std::vector<ExpertRead>& experts) {
    ReplayRecord r;
    uint64_t longest = 0;
    for (const ExpertRead& e : experts) longest = std::max(longest, e.span.length);
    const uint64_t before = reader_.stats().bytes_read;
    const double t0 = steady_s();
    m_.io().spine->read_pass(true, [&](int unit) {
      if (unit % 2 == 0 || unit / 2 >= m_.config().num_hidden_layers) return;
      size_t i = 0;
      read_spans(reader_, longest, [&](FileSpan* s) {
        while (i < experts.size() && experts[i].layer != unit / 2) i++;
        if (i == experts.size()) return false;
        *s = experts[i++].span;
        return true;
      }, &pool_);
    });
    r.seconds = steady_s() - t0;
    r.bytes = m_.io().spine->streamed_bytes_per_pass(true) + (reader_.stats().bytes_read - before);
    return r;
  }

  // One spine pass alone: the stream's bytes at its own best (no experts, no compute).
  ReplayRecord spine_only() { return run({}); }

  // The floor of the expert regime: the same spans at the same total depth
  // (the spine's loader and an expert reader at the engine's split of it) with
  // no dependency between layers: every expert span is issued at once, beside
  // one spine pass, and the time is until both are done.
  ReplayRecord run_free(const std::vector<ExpertRead>& experts) {
    ReplayRecord r;
    uint64_t longest = 0;
    for (const ExpertRead& e : experts) longest = std::max(longest, e.span.length);
    const uint64_t before = reader_.stats().bytes_read;
    const double t0 = steady_s();
    std::exception_ptr failed;
    std::thread io([&] {
      try {
        size_t i = 0;
        read_spans(reader_, std::max<uint64_t>(longest, 1), [&](FileSpan* s) {
          if (i == experts.size()) return false;
          *s = experts[i++].span;
          return true;
        }, &pool_);
      } catch (...) {
        failed = std::current_exception();
      }
    });
    if (!m_.io().spine->all_resident()) m_.io().spine->read_pass(true);
    io.join();
    if (failed) std::rethrow_exception(failed);
    r.seconds = steady_s() - t0;
    r.bytes = m_.io().spine->streamed_bytes_per_pass(true) + (reader_.stats().bytes_read - before);
    return r;
  }

 private:
  Model& m_;
  SpanReader reader_;
  std::vector<AlignedBuffer> pool_;
};


// The options the model opens with. The replayer's and the probe's read
// buffers live beside the engine: the plan sets them aside (a whole-process
// budget holds them too).
ModelOptions bench_model_options(const std::string& dir, const BenchOptions& opt, bool* depth_saved) {
  ModelOptions mo = opt.model;
  if (mo.queue_depth <= 0) mo.queue_depth = default_queue_depth(dir, depth_saved);
  const ModelConfig cfg = load_model_config(dir, mo.allow_unknown);
  const SpanReaderOptions ro;
  const uint64_t span = cfg.num_experts > 0 ? cfg.expert_span_bytes() : (16ull << 20);
  const uint64_t cap = SpanReader::direct_capacity(span);
  const uint64_t per_span = (cap + ro.chunk_bytes - 1) / ro.chunk_bytes;
  const uint64_t slots = (uint64_t(mo.queue_depth) + per_span - 1) / per_span + 1;
  const uint64_t replay = opt.replay && cfg.num_experts > 0 ? slots * cap : 0;  // io/bandwidth_probe.h read_spans
  const uint64_t probe = opt.probe_seconds > 0 ? slots * cap : 0;
  mo.extra_bytes += replay + probe;
  mo.chunk_tokens = std::min(opt.prefill_chunk_tokens, opt.prompt_tokens);
  return mo;
}

// A reproducible prompt of ordinary (non-special) ids.
std::vector<int> random_prompt(const ModelConfig& c, const BenchOptions& opt) {
  std::mt19937_64 rng(opt.seed);
  const int ordinary = std::max(1, std::min(c.vocab_size, c.bos_token_id > 0 ? c.bos_token_id : c.vocab_size));
  std::vector<int> prompt(static_cast<size_t>(opt.prompt_tokens));
  for (int& t : prompt) t = int(rng() % uint64_t(ordinary));
  return prompt;
}

// What the prefill did.
struct PrefillRecord {
  double ttft = 0;           // the whole prefill, to the first token's logits
  double cpu = 0;            // CPU seconds it used
  ExpertStats e0, e1;        // the expert source before and after
  uint64_t spine = 0;        // spine bytes read
  double depth = 0;          // mean expert reads in flight
  double io_wait = 0;        // time it sat waiting for expert reads or streamed spine pieces
  double compute_s = 0;      // its compute floor, same run: its time less io_wait
};

// Feeds the prompt in chunks, as generate() does; returns the first token.
int prefill_prompt(Session& s, const ModelIo& mio, const std::vector<int>& prompt, const BenchOptions& opt,
            PrefillRecord* r) {
  r->e0 = mio.experts->stats();
  const uint64_t spine0 = mio.spine->bytes_read();
  const SpanStreamStats ss0 = mio.spine->stream_stats();
  const double t0 = steady_s(), cpu0 = cpu_s();
  const auto fed = [&](size_t done, size_t total) {
    if (opt.prefill_progress) opt.prefill_progress(done, total);
    return true;
  };
  s.prefill_chunked(prompt, std::max(opt.prefill_chunk_tokens, 1), fed);
  const int next = argmax(s.logits());
  r->ttft = steady_s() - t0;
  r->cpu = cpu_s() - cpu0;
  r->e1 = mio.experts->stats();
  r->spine = mio.spine->bytes_read() - spine0;
  r->depth = r->ttft > 0 ? double(r->e1.read_depth_ns - r->e0.read_depth_ns) / 1e9 / r->ttft : 0.0;
  r->io_wait = double(r->e1.wait_ns - r->e0.wait_ns) / 1e9 +
               (mio.spine->stream_stats().consumer_wait_s - ss0.consumer_wait_s);
  r->compute_s = std::max(r->ttft - r->io_wait, 1e-9);
  return next;
}

// One decode step and what it did; *next becomes the step's token.
StepRecord decode_step(Model& m, const ModelIo& mio, Session& s, int* next) {
  const ExpertStats a = mio.experts->stats();
  const SpanStreamStats sa = mio.spine->stream_stats();
  const DeviceReport da = device_report(*m.backend(), false);
  const uint64_t ta = steady_ns();
  *next = argmax(s.step(*next));
  const uint64_t tb = steady_ns();
  StepRecord st;
  st.seconds = double(tb - ta) / 1e9;
  const DeviceReport db = device_report(*m.backend(), false);
  st.h2d = db.uploaded_bytes - da.uploaded_bytes, st.hbm = db.weight_bytes - da.weight_bytes;
  st.tier_hits = db.tier_hits - da.tier_hits, st.tier_misses = db.tier_misses - da.tier_misses;
  st.gpu_calls = db.gpu_calls - da.gpu_calls;
  st.gpu_times = db.call_times.minus(da.call_times);
  st.gpu_call_s = st.gpu_times.calls();
  const ExpertStats b = mio.experts->stats();
  const SpanStreamStats sb = mio.spine->stream_stats();
  st.spine = mio.spine->streamed_bytes_per_pass(true);
  st.expert = b.bytes_read - a.bytes_read;
  st.hit = b.bytes_hit - a.bytes_hit;
  st.loader_idle = sb.loader_idle_s - sa.loader_idle_s;
  st.compute_wait = sb.consumer_wait_s - sa.consumer_wait_s;
  st.expert_depth = st.seconds > 0 ? double(b.read_depth_ns - a.read_depth_ns) / 1e9 / st.seconds : 0.0;
  st.expert_idle = std::max(0.0, st.seconds - double(b.read_busy_ns - a.read_busy_ns) / 1e9);
  st.compute = std::max(0.0, st.seconds - double(b.wait_ns - a.wait_ns) / 1e9 - st.compute_wait);
  st.idle_before_layer.assign(b.idle_before_layer_ns.size(), 0.0);
  for (size_t l = 0; l < b.idle_before_layer_ns.size(); l++)
    st.idle_before_layer[l] =
        double(b.idle_before_layer_ns[l] - (l < a.idle_before_layer_ns.size() ? a.idle_before_layer_ns[l] : 0)) / 1e9;
  st.wasted = b.prefetch_wasted_bytes - a.prefetch_wasted_bytes;
  if (b.first_moe_fetch_ns > ta && b.last_fetch_end_ns > b.first_moe_fetch_ns && b.last_fetch_end_ns <= tb)
    st.boundary = double((b.first_moe_fetch_ns - ta) + (tb - b.last_fetch_end_ns)) / 1e9;
  return st;
}

// The decode steps with the I/O-only measures around them.
struct DecodeRecord {
  std::vector<StepRecord> steps;
  std::vector<ReplayRecord> replays, free_replays;  // after every step
  std::vector<ReplayRecord> spine_passes;           // bare spine passes, before and after the steps
  std::vector<ProbeResult> probes;                  // random reads, before and after the steps
  bool logged = false;                              // the expert source logged its reads for the replays
};

// The device itself: random expert-sized O_DIRECT reads of the model's
// shards at the engine's whole queue depth, half before the decode steps and half after.
ProbeOptions probe_options(const ModelConfig& c, const BenchOptions& opt, const SpanReaderOptions& io,
                           int queue_depth) {
  ProbeOptions po;
  po.read_bytes = c.num_experts > 0 ? c.expert_span_bytes() : (16ull << 20);
  po.max_seconds = opt.probe_seconds / 2;
  po.reader = io;
  po.reader.queue_depth = queue_depth;  // one reader: the whole depth
  return po;
}

DecodeRecord decode_steps(Model& m, const ModelIo& mio, Session& s, int next, const BenchOptions& opt,
                    const SpanReaderOptions& io, const ProbeOptions& po, BenchDrives& drives) {
  DecodeRecord d;
  if (opt.probe_seconds > 0) d.probes.push_back(measure_read_ceiling(m.checkpoint().shard_paths, po));
  std::vector<ExpertRead> log;
  d.logged = mio.experts->record_reads(&log);
  Replayer replayer(m, io);
  if (opt.replay && !mio.spine->all_resident()) d.spine_passes.push_back(replayer.spine_only());
  for (int i = 0; i < opt.decode_tokens; i++) {
    log.clear();
    const ExpertStats before = mio.experts->stats();
    const SpanStreamStats spine_before = mio.spine->stream_stats();
    d.steps.push_back(decode_step(m, mio, s, &next));
    if (i > 0) drives.add_step(before, mio.experts->stats(), spine_before, mio.spine->stream_stats());
    // After every step (the first too: it brackets the first steady step).
    if (opt.replay) {
      d.replays.push_back(replayer.run(log));
      d.free_replays.push_back(replayer.run_free(log));
    }
    if (opt.decode_progress) opt.decode_progress(size_t(i + 1), size_t(opt.decode_tokens));
  }
  mio.experts->record_reads(nullptr);
  if (opt.replay && !mio.spine->all_resident()) d.spine_passes.push_back(replayer.spine_only());
  if (opt.probe_seconds > 0) d.probes.push_back(measure_read_ceiling(m.checkpoint().shard_paths, po));
  if (opt.probe_seconds > 0) drives.probe(po);
  return d;
}

// The steady steps (all but the first) summed. Step i is bracketed by replays i-1 and i.
struct SteadySteps {
  std::vector<double> step_s, bracket_gbps, step_eff;
  double total_s = 0;
  uint64_t total_bytes = 0, spine_b = 0, expert_b = 0, hit_b = 0, wasted_b = 0;
  double idle = 0, wait = 0, depth = 0, expert_idle = 0;
  std::vector<double> compute_s, boundary_s;
  std::vector<double> boundary;  // per layer, summed over steady steps
  double n() const { return double(step_s.size()); }
};

SteadySteps steady_steps(const DecodeRecord& d) {
  SteadySteps s;
  for (size_t i = 1; i < d.steps.size(); i++) {
    const StepRecord& st = d.steps[i];
    s.step_s.push_back(st.seconds);
    s.total_s += st.seconds;
    s.total_bytes += st.bytes();
    s.spine_b += st.spine, s.expert_b += st.expert, s.hit_b += st.hit;
    s.idle += st.loader_idle, s.wait += st.compute_wait;
    s.depth += st.expert_depth * st.seconds;
    s.expert_idle += st.expert_idle;
    s.compute_s.push_back(st.compute);
    s.boundary_s.push_back(st.boundary);
    s.wasted_b += st.wasted;
    if (s.boundary.size() < st.idle_before_layer.size()) s.boundary.resize(st.idle_before_layer.size());
    for (size_t l = 0; l < st.idle_before_layer.size(); l++) s.boundary[l] += st.idle_before_layer[l];
    if (!d.replays.empty()) {
      const double g = (d.replays[i - 1].gbps() + d.replays[i].gbps()) / 2;
      s.bracket_gbps.push_back(g);
      s.step_eff.push_back(g > 0 ? double(st.bytes()) / st.seconds / 1e9 / g : 0.0);
    }
  }
  return s;
}

// The ceiling is the best of four I/O-only measures of the same run: the
// step's own spans with no dependency between layers (the floor of the
// expert regime), the same with each layer's reads waited for in turn, the
// spine stream alone, and random expert-sized reads.
// Striped: the sum of the drives' own ceilings, measured now.
struct Ceiling {
  double replay_gbps = 0, spine_pass_gbps = 0, free_gbps = 0, probe_gbps = 0;
  bool direct = false, uring = false;  // every probe read with O_DIRECT, through io_uring
  double gbps = 0;
  const char* source = "";
};

// Their bytes over their seconds, in GB/s.
double replays_gbps(const std::vector<ReplayRecord>& rs) {
  double s = 0, bytes = 0;
  for (const ReplayRecord& r : rs) s += r.seconds, bytes += double(r.bytes);
  return s > 0 ? bytes / s / 1e9 : 0;
}

Ceiling ceiling_of(const DecodeRecord& d, const BenchDrives& drives) {
  Ceiling c;
  c.replay_gbps = replays_gbps(d.replays);
  c.spine_pass_gbps = replays_gbps(d.spine_passes);
  c.free_gbps = replays_gbps(d.free_replays);
  double probe_bytes = 0, probe_s = 0;
  c.direct = !d.probes.empty(), c.uring = !d.probes.empty();
  for (const ProbeResult& p : d.probes) {
    probe_bytes += double(p.bytes), probe_s += p.seconds;
    c.direct = c.direct && p.direct, c.uring = c.uring && p.io_uring;
  }
  c.probe_gbps = probe_s > 0 ? probe_bytes / probe_s / 1e9 : 0;
  c.gbps = drives.ceiling_gbps() > 0 ? drives.ceiling_gbps()
                                     : std::max({c.free_gbps, c.replay_gbps, c.probe_gbps, c.spine_pass_gbps});
  c.source = drives.ceiling_gbps() > 0      ? "drives"
             : c.gbps == c.free_gbps        ? "free_replay"
             : c.gbps == c.replay_gbps      ? "replay"
             : c.gbps == c.spine_pass_gbps ? "spine_pass"
                                            : "probe";
  return c;
}

std::vector<double> seconds_of(const std::vector<ReplayRecord>& rs) {
  std::vector<double> v;
  for (const ReplayRecord& r : rs) v.push_back(r.seconds);
  return v;
}

// What the model kept in RAM and how it reads.
void add_plan_json(nlohmann::json& j, const Model& m, const ModelIo& mio, const ModelOptions& mo,
                   const BenchOptions& opt, bool depth_saved, const SpanReaderOptions& io) {
  j["ram_budget"] = m.plan().budget;
  j["spine_resident"] = m.plan().spine_resident;
  j["spine_bytes"] = {{"total", m.plan().spine_total},
                      {"resident", m.plan().spine_resident_bytes},
                      {"ring", m.plan().ring},
                      {"streamed_per_token", mio.spine->streamed_bytes_per_pass(true)}};
  j["expert_cache_bytes"] = m.plan().expert_cache;
  j["queue_depth"] = mo.queue_depth;
  j["queue_depth_per_reader"] = io.queue_depth;  // half each while the spine streams beside the experts
  j["queue_depth_source"] = opt.model.queue_depth > 0 ? "option" : depth_saved ? "probe profile" : "default";
}

void add_prefill_json(nlohmann::json& j, const PrefillRecord& p, const BenchOptions& opt) {
  j["ttft_s"] = p.ttft;
  j["prefill_tok_s"] = double(opt.prompt_tokens) / p.ttft;
  j["prefill_bytes"] = {{"spine", p.spine}, {"expert", p.e1.bytes_read - p.e0.bytes_read},
                        {"cache_hit", p.e1.bytes_hit - p.e0.bytes_hit}};
  j["prefill_expert_spans"] = {{"fetched", p.e1.fetched - p.e0.fetched},
                               {"from_cache", p.e1.cache_hits - p.e0.cache_hits}};
  j["expert_reads_in_flight_prefill"] = p.depth;
  j["prefill_io_wait_s"] = p.io_wait;
  j["prefill_compute_floor_tok_s"] = double(opt.prompt_tokens) / p.compute_s;
  j["prefill_of_compute_floor"] = p.compute_s / p.ttft;
  // CPU seconds per wall second during the prefill: how many cores it kept busy.
  j["prefill_cores_busy"] = p.ttft > 0 ? p.cpu / p.ttft : 0.0;
}

void add_prefetch_json(nlohmann::json& j, const ModelConfig& c, const ModelIo& mio) {
  const ExpertStats e = mio.experts->stats();
  j["prefetch"] = {{"spans", e.prefetched},         {"used", e.prefetch_used},
                   {"cancelled", e.prefetch_cancelled}, {"withdrawn", e.prefetch_withdrawn},
                   {"cut", e.prefetch_cut},             {"wasted", e.prefetch_wasted},
                   {"wasted_bytes", e.prefetch_wasted_bytes}, {"in_flight_at_fetch", e.prefetch_pending}};
  const Prefetcher& p = *mio.prefetcher;
  std::vector<double> rec, prec;
  for (size_t l = 0; l < p.needed.size(); l++) {
    if (!c.is_moe_layer(int(l))) continue;
    rec.push_back(p.needed[l] ? double(p.guessed[l]) / double(p.needed[l]) : 0.0);
    prec.push_back(l < p.guesses.size() && p.guesses[l] ? double(p.guessed[l]) / double(p.guesses[l]) : 0.0);
  }
  j["prefetch_recall_per_layer"] = rec;
  j["prefetch_precision_per_layer"] = prec;
  j["prefetch_precision"] = p.precision();
  j["prefetch_recall"] = p.recall();
}

// The layer boundaries: the expert reader with nothing in flight before each
// MoE layer's fetch (since the previous fetch began), per token; the first
// MoE layer's entry is the token boundary instead (head, dense layers,
// attention: the step's idle time not spent between two MoE layers).
void add_boundary_json(nlohmann::json& j, const ModelConfig& c, const SteadySteps& s) {
  const double n = s.n();
  std::vector<double> per_layer;
  double between = 0;
  int first = -1;
  for (size_t l = 0; l < s.boundary.size(); l++) {
    if (!c.is_moe_layer(int(l))) continue;
    per_layer.push_back(n > 0 ? s.boundary[l] / n : 0.0);
    if (first < 0) first = int(per_layer.size()) - 1;
    else between += per_layer.back();
  }
  const double idle_tok = n > 0 ? s.expert_idle / n : 0.0;
  if (first >= 0) per_layer[size_t(first)] = std::max(0.0, idle_tok - between);
  j["boundary_idle_s_per_layer"] = per_layer;
  j["boundary_idle_s_per_token"] = idle_tok;
  // The token boundary: from the step's start to its first MoE layer's
  // fetch, and from its last fetch's end to the step's end (head, dense
  // layers, the first MoE layer's attention and router), when no expert
  // read of the step is known yet (the reader was seen idle through it).
  j["token_boundary_s_per_token"] = median(s.boundary_s);
}

// The decode compute: what it pushed through each kernel (model/step_mix.h),
// and the measurement kept for `sluice plan` when asked (a resident spine only:
// a streamed one's loader shares the cores, so the step is not compute alone).
void add_compute_json(nlohmann::json& j, const std::string& dir, const Model& m, const SteadySteps& s,
                      const BenchOptions& opt) {
  j["decode_compute_s_per_token"] = median(s.compute_s);  // step less its waits for reads: compute's floor
  const StepMix mix = m.step_mix();
  j["compute_mix_bytes"] = {{"bf16", mix.bf16}, {"int8", mix.int8}, {"mxfp4", mix.mxfp4}, {"decoded", mix.decoded}};
  if (!opt.save_compute) return;
  ComputeProfile cp;
  cp.model = dir;
  cp.ram_budget = m.plan().budget;
  cp.threads = kernels::num_threads();
  cp.kernels = fast::isa_name(fast::isa());
  cp.steps = int(s.compute_s.size());
  cp.compute_s = median(s.compute_s);
  cp.boundary_s = median(s.boundary_s);
  cp.boundary_mix = m.token_boundary_mix();
  cp.mix = mix;
  save_compute_profile(compute_profile_path(), cp);
  j["compute_profile_saved"] = compute_profile_path();
}

// The decode steps against the ceiling.
void add_decode_json(nlohmann::json& j, const DecodeRecord& d, const SteadySteps& s, const Ceiling& ceiling) {
  const double n = s.n();
  const double achieved = s.total_s > 0 ? double(s.total_bytes) / s.total_s / 1e9 : 0;
  const double step_median = median(s.step_s);
  const double bytes_pt = n > 0 ? double(s.total_bytes) / n : 0;
  j["decode_s_per_token"] = step_median;
  j["decode_steps_s"] = [&] {
    std::vector<double> v;
    for (const StepRecord& st : d.steps) v.push_back(st.seconds);
    return v;
  }();
  j["bytes_per_token"] = {{"spine", n > 0 ? double(s.spine_b) / n : 0.0},
                          {"expert", n > 0 ? double(s.expert_b) / n : 0.0},
                          {"cache_hit", n > 0 ? double(s.hit_b) / n : 0.0}};
  j["achieved_gbps"] = achieved;
  // Bytes the step needed (guesses its layers did not use left out), against the same ceiling.
  const double useful = s.total_s > 0 ? double(s.total_bytes - s.wasted_b) / s.total_s / 1e9 : 0;
  j["useful_gbps"] = useful;
  j["io_efficiency_useful"] = ceiling.gbps > 0 ? useful / ceiling.gbps : 0.0;
  j["prefetch_wasted_bytes_per_token"] = n > 0 ? double(s.wasted_b) / n : 0.0;
  j["expert_reads_in_flight_decode"] = s.total_s > 0 ? s.depth / s.total_s : 0.0;
  j["loader_idle_s_per_token"] = n > 0 ? s.idle / n : 0.0;
  j["compute_waited_for_spine_s_per_token"] = n > 0 ? s.wait / n : 0.0;
  j["replay_gbps"] = ceiling.replay_gbps;
  j["replay_s"] = seconds_of(d.replays);
  j["spine_pass_gbps"] = ceiling.spine_pass_gbps;
  j["free_replay_gbps"] = ceiling.free_gbps;  // the step's spans, no dependency between layers
  j["free_replay_s"] = seconds_of(d.free_replays);
  j["replay_covers_experts"] = d.logged;
  j["probe_random_gbps"] = ceiling.probe_gbps;
  j["ceiling_gbps"] = ceiling.gbps;
  j["ceiling_source"] = ceiling.source;
  j["ceiling_direct"] = ceiling.direct || d.probes.empty();
  j["ceiling_io_uring"] = ceiling.uring;
  j["io_efficiency"] = ceiling.gbps > 0 ? achieved / ceiling.gbps : 0.0;
  j["step_over_floor"] =
      ceiling.gbps > 0 && bytes_pt > 0 ? step_median / (bytes_pt / (ceiling.gbps * 1e9)) : 0.0;
  // Which floor binds: the step's bytes at the ceiling, or its compute (the
  // step less its waits for reads). When compute is the larger, no read order
  // can bring step_over_floor to 1: the disk must idle part of the step.
  const double io_floor = ceiling.gbps > 0 ? bytes_pt / (ceiling.gbps * 1e9) : 0.0;
  j["io_floor_s_per_token"] = io_floor;
  j["bound"] = median(s.compute_s) > io_floor ? "compute" : "io";
  // The best step_over_floor any read order could reach in this run is
  // max(1, this) (the step cannot beat its compute), and the best
  // io_efficiency 1 / that: the ratios' limit set by compute, same run.
  j["compute_over_io_floor"] = io_floor > 0 ? median(s.compute_s) / io_floor : 0.0;
  j["step_efficiency_vs_bracketing_replays"] = s.step_eff;
  j["step_efficiency_median"] = median(s.step_eff);
  j["decode_tok_s"] = step_median > 0 ? 1 / step_median : 0.0;
}

// On a GPU: each steady step against the floor of its slowest tier, the
// ceilings measured now (same run): its disk bytes at the I/O ceiling above,
// its host -> device weight bytes at the pinned H2D ceiling, the weight
// bytes its products read at the HBM read ceiling.
void add_gpu_json(nlohmann::json& j, const Model& m, const std::vector<StepRecord>& steps, double ceiling, double n) {
  const DeviceReport d = device_report(*m.backend(), true);
  if (!d.gpu) return;
  std::vector<double> floors, over;
  std::vector<std::string> tiers;
  std::vector<double> call_s;
  std::vector<GpuCallTimes> times;
  double h2d = 0, hbm = 0, hits = 0, misses = 0, calls = 0;
  for (size_t i = 1; i < steps.size(); i++) {
    const StepRecord& st = steps[i];
    const double disk_s = ceiling > 0 ? double(st.bytes()) / (ceiling * 1e9) : 0.0;
    const double h2d_s = d.h2d_pinned_gbs > 0 ? double(st.h2d) / (d.h2d_pinned_gbs * 1e9) : 0.0;
    const double hbm_s = d.hbm_read_gbs > 0 ? double(st.hbm) / (d.hbm_read_gbs * 1e9) : 0.0;
    const double f = std::max({disk_s, h2d_s, hbm_s});
    floors.push_back(f);
    over.push_back(f > 0 ? st.seconds / f : 0.0);
    tiers.push_back(f == disk_s ? "disk" : f == h2d_s ? "h2d" : "hbm");
    h2d += double(st.h2d), hbm += double(st.hbm), hits += double(st.tier_hits), misses += double(st.tier_misses);
    calls += double(st.gpu_calls);
    call_s.push_back(st.gpu_call_s);
    times.push_back(st.gpu_times);
  }
  // Each kind's median over the steady steps (where a step's GPU time goes).
  const auto by_kind = [&](double GpuCallTimes::*kind) {
    std::vector<double> v;
    for (const GpuCallTimes& t : times) v.push_back(t.*kind);
    return median(v);
  };
  const auto of_hbm = [&](double gbs) { return d.hbm_read_gbs > 0 ? gbs / d.hbm_read_gbs : 0.0; };
  j["gpu"] = {{"hbm_read_gbs", d.hbm_read_gbs},
              {"pinned_h2d_gbs", d.h2d_pinned_gbs},
              {"mxfp4_gemv_gbs", d.mxfp4_gemv_gbs},  // K3's gate+up experts, one grouped launch
              {"mxfp4_gemv_of_hbm", of_hbm(d.mxfp4_gemv_gbs)},
              {"bf16_gemv_gbs", d.bf16_gemv_gbs},  // 7168 × 7168
              {"bf16_gemv_of_hbm", of_hbm(d.bf16_gemv_gbs)},
              {"disk_gbs", ceiling},
              {"matrix_calls", d.gpu_calls},
              {"resident_bytes_peak", d.resident_bytes_peak},
              {"uploaded_bytes", d.uploaded_bytes},
              {"uploaded_pinned_bytes", d.uploaded_pinned_bytes},
              {"uploaded_staged_bytes", d.uploaded_staged_bytes},
              {"pinned_host_bytes", d.pinned_host_bytes},
              {"vram_expert_tier_bytes", d.tier_bytes},
              {"cpu_matrix_calls", d.cpu_matrix_calls},
              {"kda_calls", d.kda_calls},
              {"kda_state_hits", d.kda_state_hits},
              {"kda_state_uploaded_bytes", d.kda_state_uploaded_bytes},
              {"mla_calls", d.mla_calls},
              {"dsa_calls", d.dsa_calls},
              {"mla_cache_hits", d.mla_cache_hits},
              {"mla_cache_uploaded_bytes", d.mla_cache_uploaded_bytes},
              {"state_vram_bytes", d.state_bytes},
              {"vram_used_bytes", d.vram_used},
              {"vram_peak_bytes", d.vram_peak},
              {"vram_total_bytes", d.vram_total},
              {"cpu_spill_calls", d.cpu_spill_calls},
              {"split_calls", d.split_calls},
              {"split_share", d.split_share},
              {"cpu_spill_bytes", d.cpu_spill_bytes},
              {"h2d_bytes_per_token", n > 0 ? h2d / n : 0.0},
              {"hbm_weight_bytes_per_token", n > 0 ? hbm / n : 0.0},
              {"tier_hits_per_token", n > 0 ? hits / n : 0.0},
              {"tier_misses_per_token", n > 0 ? misses / n : 0.0},
              {"gpu_calls_per_token", n > 0 ? calls / n : 0.0},
              {"gpu_call_s_per_step", call_s},
              {"gpu_call_s_median", median(call_s)},
              {"gpu_call_s_by_kind_median",
               {{"bf16", by_kind(&GpuCallTimes::bf16)},
                {"mxfp4", by_kind(&GpuCallTimes::mxfp4)},
                {"kda", by_kind(&GpuCallTimes::kda)},
                {"mla", by_kind(&GpuCallTimes::mla)},
                {"dsa", by_kind(&GpuCallTimes::dsa)},
                {"split", by_kind(&GpuCallTimes::split)},
                {"sync_wait", by_kind(&GpuCallTimes::sync)},
                {"split_cpu_rows", by_kind(&GpuCallTimes::split_cpu)},
                {"split_gpu_events", by_kind(&GpuCallTimes::split_gpu)}}},
              {"floor_s_per_step", floors},
              {"floor_tier_per_step", tiers},
              {"step_over_floor_per_step", over},
              {"floor_s_median", median(floors)},
              {"step_over_floor_median", median(over)}};
}

}  // namespace

nlohmann::json run_bench(const std::string& dir, const BenchOptions& opt) {
  if (opt.prompt_tokens < 1) fail("bench", "--prompt-tokens must be at least 1");
  if (opt.decode_tokens < 2) fail("bench", "--decode must be at least 2 (the first step is discarded)");
  bool depth_saved = false;
  ModelOptions mo = bench_model_options(dir, opt, &depth_saved);

  const double t_open = steady_s();
  if (!mo.miss_filler) mo.miss_filler = stream_miss_filler(dir);
  auto m = open_model(dir, mo);
  const double open_s = steady_s() - t_open;
  const ModelIo mio = m->io();
  if (!mio.spine || !mio.experts || !mio.prefetcher) fail("bench", "the model reports no reads to measure");
  if (opt.save_compute && !mio.spine->all_resident())
    fail("bench", "--save-compute needs the whole spine resident (a larger --ram-budget): with a streamed spine "
                  "the loader shares the cores and a step is not compute alone");
  const ModelConfig& c = m->config();
  // The replays read as the engine does: each reader at its share of the depth.
  SpanReaderOptions io;
  io.queue_depth = mio.reader_depth;

  Session s(*m);
  PrefillRecord pre;
  const int next = prefill_prompt(s, mio, random_prompt(c, opt), opt, &pre);
  const ProbeOptions po = probe_options(c, opt, io, mo.queue_depth);
  BenchDrives drives(*m);  // a striped model: per-drive bytes and ceilings
  const DecodeRecord d = decode_steps(*m, mio, s, next, opt, io, po, drives);
  const SteadySteps steady = steady_steps(d);
  const Ceiling ceiling = ceiling_of(d, drives);

  nlohmann::json j;
  j["model"] = dir;
  if (drives.striped()) j["drives"] = drives.json(int(steady.n()), steady.total_s);
  add_plan_json(j, *m, mio, mo, opt, depth_saved, io);
  j["open_s"] = open_s;
  j["prompt_tokens"] = opt.prompt_tokens;
  j["prefill_chunk_tokens"] = opt.prefill_chunk_tokens;
  j["decode_tokens"] = opt.decode_tokens;
  add_prefill_json(j, pre, opt);
  add_decode_json(j, d, steady, ceiling);
  add_prefetch_json(j, c, mio);
  add_boundary_json(j, c, steady);
  add_compute_json(j, dir, *m, steady, opt);
  add_gpu_json(j, *m, d.steps, ceiling.gbps, steady.n());
  return j;
}

}  // namespace sluice
