// Memory budget: a budget that forces the spine to stream gives bit-identical
// logits to the resident run; a budget below the working minimum is refused
// with a message naming that minimum.
#include "k3/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "arch/open.h"
#include "base/error.h"
#include "base/read_fault.h"
#include "engine/session_test_util.h"
#include "io/aligned_buffer.h"
#include "k3/k3_model.h"
#include "kernels/backend.h"

namespace sluice {
namespace {

const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

TEST(Model, StreamedSpineIsBitIdenticalToResident) {
  const std::vector<int> toks = {448, 259, 309, 412, 370, 399, 335, 283, 72, 307, 450, 12};
  auto resident = open_model(kFixture);
  ASSERT_TRUE(k3_parts(*resident).plan.spine_resident);
  ModelOptions small;
  small.ram_budget = 2 << 20;  // 2 MiB: the fixture is 4.4 MB
  auto streamed = open_model(kFixture, small);
  EXPECT_FALSE(k3_parts(*streamed).plan.spine_resident);
  EXPECT_LE(k3_parts(*streamed).plan.minimum, small.ram_budget);
  for (bool steps : {false, true}) {
    EXPECT_EQ(run_all(*resident, toks, steps), run_all(*streamed, toks, steps)) << (steps ? "step" : "prefill");
  }
  // A head streamed in many small chunks changes nothing either.
  ModelOptions chunks = small;
  chunks.spine_chunk_bytes = 10000;
  auto chunked = open_model(kFixture, chunks);
  EXPECT_EQ(run_all(*resident, toks, false), run_all(*chunked, toks, false));
  // Streaming reads every layer again for every forward call.
  EXPECT_GT(k3_parts(*streamed).spine->bytes_read(), k3_parts(*resident).spine->bytes_read() * 2);
}

// The model computes on the backend it is given (kernels/backend.h; the
// kernel choice's CPU entry by default): every CPU entry runs the whole model,
// prefill equals steps bitwise within an entry, and entries agree to
// summation-order noise.
TEST(Model, RunsOnEveryCpuBackend) {
  const std::vector<int> toks = {448, 259, 309, 412, 370, 399};
  EXPECT_EQ(k3_parts(*open_model(kFixture)).backend, &cpu_backend());
  std::vector<std::vector<float>> per_entry;
  for (const Backend* be : backends()) {
    ModelOptions o;
    o.backend = be;
    auto m = open_model(kFixture, o);
    EXPECT_EQ(k3_parts(*m).backend, be);
    EXPECT_EQ(&k3_parts(*m).spine->backend(), be);
    per_entry.push_back(run_all(*m, toks, false));
    EXPECT_EQ(run_all(*m, toks, true), per_entry.back()) << be->name << ": prefill != steps";
  }
  for (size_t e = 1; e < per_entry.size(); e++) {
    ASSERT_EQ(per_entry[e].size(), per_entry[0].size());
    for (size_t i = 0; i < per_entry[0].size(); i++)
      ASSERT_NEAR(per_entry[e][i], per_entry[0][i], 1e-3 * (1 + std::fabs(per_entry[0][i]))) << "logit " << i;
  }
}

// Between the minimum and the whole spine, the budget keeps some pieces
// resident and streams the rest; the logits are the same bits, the bytes
// streamed per pass are fewer the more is kept, and the kept pieces are spread
// over the pass, not bunched at its start.
TEST(Model, PartlyResidentSpineIsBitIdenticalAndStreamsLess) {
  const std::vector<int> toks = {448, 259, 309, 412, 370, 399, 335, 283};
  auto resident = open_model(kFixture);
  const std::vector<float> want = run_all(*resident, toks, true);
  uint64_t last_streamed = ~0ull;
  int partly = 0;
  for (uint64_t budget : {uint64_t(2) << 20, uint64_t(2560) << 10, uint64_t(3) << 20, uint64_t(7) << 19}) {
    ModelOptions o;
    o.ram_budget = budget;
    o.spine_chunk_bytes = 16 << 10;  // many pieces, so partial residency has room to show
    o.max_context = 256;             // little state: the budget goes to the spine
    auto m = open_model(kFixture, o);
    const MemoryPlan& p = k3_parts(*m).plan;
    ASSERT_FALSE(p.spine_resident) << budget;
    EXPECT_LE(p.spine_resident_bytes + p.ring + p.fixed + p.state_reserve + p.expert_buffers + p.expert_cache, budget);
    EXPECT_EQ(run_all(*m, toks, true), want) << "budget " << budget;
    const uint64_t streamed = k3_parts(*m).spine->streamed_bytes_per_pass(true);
    EXPECT_LE(streamed, last_streamed) << budget;
    last_streamed = streamed;
    if (p.spine_resident_bytes > 0) {
      partly++;
      // Spread: resident pieces reach into the second half of the pass.
      const size_t n = p.resident_pieces.size();
      size_t last = 0;
      for (size_t i = 0; i < n; i++)
        if (p.resident_pieces[i]) last = i;
      EXPECT_GT(last, n / 2) << budget;
    }
  }
  EXPECT_GE(partly, 2);
}

// A queue depth is the device's: while the spine streams, its loader and the
// expert reader share it; with the spine resident the expert reader has it
// all. The shallowest split still gives the same bits.
TEST(Model, ReadersShareTheQueueDepthWhileTheSpineStreams) {
  EXPECT_EQ(reader_queue_depth(16, true), 8);
  EXPECT_EQ(reader_queue_depth(16, false), 16);
  EXPECT_EQ(reader_queue_depth(3, true), 1);
  EXPECT_EQ(reader_queue_depth(1, true), 1);
  const std::vector<int> toks = {448, 259, 309, 412};
  auto resident = open_model(kFixture);
  const std::vector<float> want = run_all(*resident, toks, true);
  ModelOptions o;
  o.ram_budget = uint64_t(2) << 20;
  o.spine_chunk_bytes = 16 << 10;
  o.max_context = 256;
  o.queue_depth = 1;
  auto m = open_model(kFixture, o);
  ASSERT_FALSE(k3_parts(*m).plan.spine_resident);
  EXPECT_EQ(run_all(*m, toks, true), want);
}

// A shard cut short while the spine streams: the next passes fail with an
// error naming the shard, never a hang or wrong logits.
TEST(Model, ShardTruncatedMidRunGivesAnErrorNamingIt) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(SLUICE_BINARY).parent_path() / "model-truncate-test";
  fs::remove_all(dir);
  fs::copy(kFixture, dir);
  ModelOptions o;
  o.ram_budget = 2 << 20;  // everything streams
  auto m = open_model(dir.string(), o);
  Session s(*m);
  const std::vector<int> prompt = {448, 259, 309};
  s.prefill(prompt);
  // The head is read on every pass; cut its shard in half.
  const std::string shard = k3_parts(*m).ck.shard_paths[size_t(k3_parts(*m).ck.tensor("lm_head.weight").shard)];
  fs::resize_file(shard, fs::file_size(shard) / 2);
  std::string error;
  for (int i = 0; i < 4 && error.empty(); i++) {
    try {
      s.step(412);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  EXPECT_NE(error.find(shard), std::string::npos) << error;
  // Restored: the failure does not stick; a new session gives a clean run's logits.
  fs::copy_file(kFixture + "/" + fs::path(shard).filename().string(), shard, fs::copy_options::overwrite_existing);
  auto clean = open_model(kFixture, o);
  const std::vector<int> toks = {448, 259, 309, 412};
  EXPECT_EQ(run_all(*m, toks, false), run_all(*clean, toks, false));
  EXPECT_EQ(run_all(*m, toks, true), run_all(*clean, toks, true));
  m.reset();
  fs::remove_all(dir);
}

// Transient read faults (EIO or a short read, by the seam of
// base/read_fault.h) on expert, spine (the head) and embedding bytes, with
// the spine streamed and resident: the pass that hits one fails naming the
// shard, /health's record says failing until a pass succeeds, and the next
// 10 runs give a clean run's logits bit for bit.
TEST(Model, ReadFaultsFailOnlyThePassThatHitsThem) {
  const std::vector<int> toks = {448, 259, 309, 412, 370};
  auto reference = open_model(kFixture);
  const std::vector<float> clean = run_all(*reference, toks, false);
  const Checkpoint& ck = k3_parts(*reference).ck;
  const int H = ck.config.hidden_size;
  struct Target {
    const char* name;
    int file;
    uint64_t begin, length;
  };
  // Every expert of the first MoE layer in its first expert's shard (whichever
  // is routed), less the blocks it shares with other tensors.
  const int moe = ck.config.first_k_dense_replace;
  const FileSpan e0 = ck.experts.at(size_t(moe)).at(0);
  uint64_t e_end = e0.offset + e0.length;
  for (const FileSpan& e : ck.experts[size_t(moe)])
    if (e.file == e0.file) e_end = std::max(e_end, e.offset + e.length);
  const TensorInfo& head = ck.tensor("lm_head.weight");
  const TensorInfo& embed = ck.tensor("model.embed_tokens.weight");
  const Target targets[] = {
      {"expert", e0.file, align_up(e0.offset, kIoAlign), align_down(e_end, kIoAlign) - align_up(e0.offset, kIoAlign)},
      {"spine", head.shard, head.offset + head.nbytes / 2, 1},
      {"embedding", embed.shard, embed.offset + uint64_t(toks[1]) * uint64_t(H) * 2, uint64_t(H) * 2},
  };
  for (bool streamed : {true, false}) {
    ModelOptions o;
    if (streamed) o.ram_budget = 2 << 20;
    for (const Target& t : targets) {
      for (FaultKind kind : {FaultKind::eio, FaultKind::short_read}) {
        SCOPED_TRACE(std::string(streamed ? "streamed " : "resident ") + t.name + (kind == FaultKind::eio ? " eio" : " short"));
        auto m = open_model(kFixture, o);  // a fresh one: nothing cached yet
        ASSERT_EQ(k3_parts(*m).plan.spine_resident, !streamed);
        const std::string shard = ck.shard_paths[size_t(t.file)];
        // EIO once; a short read until cleared (a buffered read cut short
        // goes on where it stopped: one cut alone may not fail it).
        clear_read_faults();
        add_read_fault({kind, shard, t.begin, t.length, kind == FaultKind::eio ? 1 : -1});
        std::string error;
        try {
          // Clean when the fault hit only a guess (an expert read ahead: its
          // fetch reads it again), or never fired (a resident spine is read once).
          EXPECT_EQ(run_all(*m, toks, false), clean);
        } catch (const Error& e) {
          error = e.what();
          EXPECT_NE(error.find(shard), std::string::npos) << error;
          EXPECT_TRUE(read_health().failing);
        }
        const bool spine = std::string(t.name) == "spine";
        if (streamed || !spine) {
          EXPECT_GE(read_faults_fired(), 1u);
        }
        if (std::string(t.name) != "expert" && (streamed || !spine)) {
          EXPECT_FALSE(error.empty()) << "nothing failed";
        }
        clear_read_faults();
        for (int run = 0; run < 10; run++) EXPECT_EQ(run_all(*m, toks, false), clean) << "run " << run;
        EXPECT_FALSE(read_health().failing);
      }
    }
  }
  clear_read_faults();
}

TEST(Model, BudgetBelowMinimumIsRefused) {
  ModelOptions tiny;
  tiny.ram_budget = 100 << 10;
  try {
    open_model(kFixture, tiny);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("below this model's working minimum of"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Expert sources differ in where bytes come from, never in the result: plain
// pread, and io_uring/O_DIRECT with a cache from none to everything.
TEST(Model, ExpertSourcesGiveIdenticalLogits) {
  const std::vector<int> toks = {448, 259, 309, 412, 370, 399, 335, 283, 72, 307, 450, 12, 99, 100};
  ModelOptions pread;
  pread.pread_experts = true;
  auto base = open_model(kFixture, pread);
  const std::vector<float> want = run_all(*base, toks, false);
  const std::vector<float> want_steps = run_all(*base, toks, true);
  for (uint64_t budget : {uint64_t(2) << 20, uint64_t(3) << 20, uint64_t(64) << 20}) {
    ModelOptions o;
    o.ram_budget = budget;
    auto m = open_model(kFixture, o);
    EXPECT_EQ(run_all(*m, toks, false), want) << "budget " << budget;
    EXPECT_EQ(run_all(*m, toks, true), want_steps) << "budget " << budget;
    ExpertStats st = k3_parts(*m).experts->stats();
    EXPECT_GT(st.fetched, 0u);
    if (budget == (uint64_t(64) << 20)) {
      EXPECT_GT(st.cache_hits, 0u);
    }
  }
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Expert-major prefill: a chunk reads each (layer, expert) it needs exactly once.
TEST(Model, PrefillReadsEachNeededExpertOncePerLayer) {
  ModelOptions o;
  o.ram_budget = 2 << 20;  // no room to cache: every fetch is a read
  auto m = open_model(kFixture, o);
  std::vector<int> toks;
  for (int i = 0; i < 64; i++) toks.push_back((i * 37 + 11) % 448);
  ModelState st = m->new_state();
  std::vector<float> logits;
  ForwardTrace trace;
  m->forward(st, toks, Logits::Last, &logits, &trace);
  const ModelConfig& c = m->config();
  const int K = c.num_experts_per_token, T = int(toks.size());
  size_t unique = 0;
  for (int l = 0; l < c.num_hidden_layers - c.first_k_dense_replace; l++) {
    std::set<int> used(trace.experts.begin() + ptrdiff_t(size_t(l) * T * K),
                       trace.experts.begin() + ptrdiff_t(size_t(l + 1) * T * K));
    unique += used.size();
  }
  const ExpertStats s = k3_parts(*m).experts->stats();
  EXPECT_EQ(s.fetched, unique);
  EXPECT_LT(unique, size_t(T) * K * size_t(c.num_hidden_layers - c.first_k_dense_replace));
  EXPECT_LE(s.bytes_read, (unique + s.prefetched) * (c.expert_span_bytes() + 8192));
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// The forward pass uses the spine's matrices in the order binding declared
// them (each sublayer's use_order(), the head last): ids 0, 1, 2, ... in every
// pass, a prefill chunk or a step. A sublayer whose list disagrees with its
// forward pass fails here, resident or not (streaming would throw too).
TEST(Model, ForwardUsesSpineMatricesInDeclaredOrder) {
  auto m = open_model(kFixture);
  std::vector<int> used;
  k3_parts(*m).spine->record_use(&used);
  ModelState st = m->new_state();
  std::vector<float> logits;
  for (int T : {5, 1}) {
    used.clear();
    const std::vector<int> toks(size_t(T), 7);
    m->forward(st, toks, Logits::Last, &logits);
    ASSERT_EQ(used.size(), size_t(k3_parts(*m).spine->head().id + 1)) << "T=" << T;
    for (size_t i = 0; i < used.size(); i++) ASSERT_EQ(used[i], int(i)) << "T=" << T << ", use " << i;
  }
}

}  // namespace
}  // namespace sluice
