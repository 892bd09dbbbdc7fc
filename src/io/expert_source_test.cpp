#include "io/expert_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/read_fault.h"
#include "checkpoint/checkpoint.h"
#include "io/aligned_buffer.h"
#include "io/span_reader.h"

namespace sluice {
namespace {

// Hands out pread bytes and counts the experts it was asked for.
class CountingSource : public ExpertSource {
 public:
  CountingSource(const Checkpoint& ck, int* asked) : inner_(make_pread_expert_source(ck)), asked_(asked) {}
  void fetch(int layer, std::span<const int> experts,
             const std::function<void(size_t, const uint8_t*)>& use) override {
    *asked_ += int(experts.size());
    inner_->fetch(layer, experts, use);
  }

 private:
  std::unique_ptr<ExpertSource> inner_;
  int* asked_;
};

std::vector<std::vector<uint8_t>> fetch_all(ExpertSource& s, const Checkpoint& ck, int layer,
                                            const std::vector<int>& experts) {
  std::vector<std::vector<uint8_t>> out(experts.size());
  const uint64_t n = ck.config.expert_span_bytes();
  s.fetch(layer, experts, [&](size_t i, const uint8_t* p) { out[i].assign(p, p + n); });
  return out;
}

// A stream install's source: the RAM cache in front, the filler asked only
// for misses, and what it returns cached; bytes identical to a plain read.
TEST(ExpertSource, MissFillerIsAskedOnlyForWhatTheCacheLacks) {
  const Checkpoint ck = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  const int layer = ck.config.first_k_dense_replace;
  const std::vector<int> first = {0, 3, 5}, second = {5, 1, 0};
  auto plain = make_pread_expert_source(ck);
  int asked = 0;
  DirectSourceOptions d;
  d.cache_bytes = 64ull << 20;
  d.inflight_bytes = 1ull << 20;
  auto stacked = make_direct_expert_source(ck, d, std::make_unique<CountingSource>(ck, &asked));
  ASSERT_NE(stacked->miss_filler(), nullptr);
  EXPECT_EQ(fetch_all(*stacked, ck, layer, first), fetch_all(*plain, ck, layer, first));
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(fetch_all(*stacked, ck, layer, second), fetch_all(*plain, ck, layer, second));
  EXPECT_EQ(asked, 4);  // only expert 1 was not cached
  const ExpertStats s = stacked->stats();
  EXPECT_EQ(s.fetched, 6u);
  EXPECT_EQ(s.cache_hits, 2u);
  EXPECT_EQ(s.bytes_read, 0u);  // nothing read from the (holed) shards
}

// A read fault on one expert's bytes fails the fetch that needs it, naming
// the shard and the offset; the next fetch reads it again and gets the bytes
// a clean read gets, from the direct source (cached or not) and the pread one.
// A failed guess (prefetch) fails nothing: its layer's fetch reads it again.
TEST(ExpertSource, AReadFaultFailsOneFetchAndTheNextReadsAgain) {
  const Checkpoint ck = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  const int layer = ck.config.first_k_dense_replace;
  const std::vector<int> experts = {0, 3, 5};
  const FileSpan bad = ck.experts.at(size_t(layer)).at(3);
  const std::string shard = ck.shard_paths.at(size_t(bad.file));
  auto plain = make_pread_expert_source(ck);
  const auto clean = fetch_all(*plain, ck, layer, experts);
  for (int variant = 0; variant < 3; variant++) {
    SCOPED_TRACE(variant == 0 ? "direct, cached" : variant == 1 ? "direct, no cache" : "pread");
    DirectSourceOptions d;
    d.cache_bytes = variant == 0 ? 64ull << 20 : 0;
    d.inflight_bytes = 1ull << 20;
    auto src = variant < 2 ? make_direct_expert_source(ck, d) : make_pread_expert_source(ck);
    clear_read_faults();
    add_read_fault({FaultKind::eio, shard, bad.offset + bad.length / 2, 1, 1});
    try {
      fetch_all(*src, ck, layer, experts);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(shard), std::string::npos) << what;
      EXPECT_NE(what.find("offset"), std::string::npos) << what;
    }
    EXPECT_EQ(read_faults_fired(), 1u);
    EXPECT_EQ(fetch_all(*src, ck, layer, experts), clean);
    EXPECT_EQ(fetch_all(*src, ck, layer, experts), clean);
  }
  // A guess for the next layer that fails: that layer's fetch reads the expert again.
  const FileSpan next = ck.experts.at(size_t(layer + 1)).at(3);
  const auto clean_next = fetch_all(*plain, ck, layer + 1, experts);
  DirectSourceOptions d;
  d.cache_bytes = 64ull << 20;
  d.inflight_bytes = 1ull << 20;
  auto guessed = make_direct_expert_source(ck, d);
  clear_read_faults();
  add_read_fault({FaultKind::eio, ck.shard_paths.at(size_t(next.file)), next.offset, 1, 1});
  guessed->prefetch(layer + 1, experts);
  EXPECT_EQ(fetch_all(*guessed, ck, layer, experts), clean);  // issues the guesses after its own reads
  for (int i = 0; i < 5000 && read_faults_fired() == 0; i++) {  // the guess fails between fetches
    guessed->pump();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  guessed->pump();
  EXPECT_EQ(fetch_all(*guessed, ck, layer + 1, experts), clean_next);
  EXPECT_EQ(read_faults_fired(), 1u);
  clear_read_faults();
}

// prefetch_when_idle: with several drives (a stripe's reader devices), the
// hinted experts of a later pass are read while their drive has nothing else
// in flight, and that layer's fetch then finds them cached; with one drive the
// hint is ignored.
TEST(ExpertSource, IdleDriveHintsAreReadOnlyWithSeveralDrives) {
  const Checkpoint ck = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  const int layer = ck.config.first_k_dense_replace;
  const std::vector<int> experts = {0, 3, 5};
  auto plain = make_pread_expert_source(ck);
  const auto clean = fetch_all(*plain, ck, layer, experts);
  const auto clean_next = fetch_all(*plain, ck, layer + 1, experts);
  for (const bool striped : {false, true}) {
    SCOPED_TRACE(striped ? "two drives" : "one drive");
    DirectSourceOptions d;
    d.cache_bytes = 64ull << 20;
    d.inflight_bytes = 1ull << 20;
    if (striped) {  // layer + 1's experts on a second drive
      d.device_depths = {4};
      d.file_devices.assign(ck.shard_paths.size(), 0);
      for (int e : experts) d.file_devices.at(size_t(ck.experts.at(size_t(layer + 1)).at(size_t(e)).file)) = 1;
    }
    auto src = make_direct_expert_source(ck, d);
    src->prefetch_when_idle(layer + 1, experts);
    EXPECT_EQ(fetch_all(*src, ck, layer, experts), clean);
    for (int i = 0; i < 5000 && src->stats().prefetched < experts.size(); i++) {
      src->pump();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (int i = 0; i < 100; i++) src->pump();
    EXPECT_EQ(src->stats().prefetched, striped ? experts.size() : 0u);
    // Issued is not landed: on a busy machine wait for the hinted bytes too
    // (the layer's reads and the three hints, each its aligned superset).
    uint64_t all = 0;
    for (int l : {layer, layer + 1})
      for (int e : experts) {
        const FileSpan& s = ck.experts.at(size_t(l)).at(size_t(e));
        all += SpanReader::direct_bytes(s.offset, s.length);
      }
    for (int i = 0; striped && i < 5000 && src->stats().bytes_read < all; i++) {
      src->pump();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const uint64_t read_before = src->stats().bytes_read;
    EXPECT_EQ(fetch_all(*src, ck, layer + 1, experts), clean_next);
    if (striped) {
      EXPECT_EQ(src->stats().bytes_read, read_before);  // all three were read ahead
    }
  }
}

// fetch_overlapped: meanwhile() runs exactly once, before the first use()
// when the fetch must wait for reads (a cold cache), after the last when
// everything was at hand (the same experts again, now cached, and the
// default of a source without reads of its own); the bytes are a plain fetch's.
TEST(ExpertSource, MeanwhileRunsOnceWhereTheFetchWouldWait) {
  const Checkpoint ck = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  const int layer = ck.config.first_k_dense_replace;
  const std::vector<int> experts = {0, 3, 5};
  const uint64_t n = ck.config.expert_span_bytes();
  auto plain = make_pread_expert_source(ck);
  DirectSourceOptions d;
  d.cache_bytes = 64ull << 20;
  d.inflight_bytes = 1ull << 20;
  auto direct = make_direct_expert_source(ck, d);
  // Events in order: the expert index for a use(), -1 for meanwhile().
  auto run = [&](ExpertSource& s, std::vector<int>* events) {
    std::vector<std::vector<uint8_t>> out(experts.size());
    s.fetch_overlapped(layer, experts, [&](size_t i, const uint8_t* p) {
      out[i].assign(p, p + n);
      events->push_back(int(i));
    }, [&] { events->push_back(-1); });
    return out;
  };
  const std::vector<std::vector<uint8_t>> want = fetch_all(*plain, ck, layer, experts);
  std::vector<int> cold, warm, pread;
  EXPECT_EQ(run(*direct, &cold), want);
  EXPECT_EQ(run(*direct, &warm), want);
  EXPECT_EQ(run(*plain, &pread), want);
  for (const std::vector<int>* e : {&cold, &warm, &pread}) {
    ASSERT_EQ(e->size(), experts.size() + 1);
    EXPECT_EQ(std::count(e->begin(), e->end(), -1), 1);
  }
  EXPECT_EQ(cold.front(), -1);  // nothing cached: it had to wait before the first use
  EXPECT_EQ(warm.back(), -1);   // all cached: never waited
  EXPECT_EQ(pread.back(), -1);
  EXPECT_EQ(direct->stats().cache_hits, experts.size());
}

// fetch_batches: every expert exactly once with a plain fetch's bytes; a
// warm fetch (everything cached) hands all of them in one batch, a cold one
// at least one batch per landing (never an empty batch); the default of a
// source without its own batching hands batches of one.
TEST(ExpertSource, BatchesHandEachExpertOnceAndTheCachedTogether) {
  const Checkpoint ck = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  const int layer = ck.config.first_k_dense_replace;
  const std::vector<int> experts = {7, 0, 3, 5, 2};
  const uint64_t n = ck.config.expert_span_bytes();
  auto plain = make_pread_expert_source(ck);
  DirectSourceOptions d;
  d.cache_bytes = 64ull << 20;
  d.inflight_bytes = 2 * n;  // reads land in several rounds
  auto direct = make_direct_expert_source(ck, d);
  auto run = [&](ExpertSource& s, std::vector<size_t>* sizes) {
    std::vector<std::vector<uint8_t>> out(experts.size());
    int meanwhile = 0;
    s.fetch_batches(layer, experts, [&](std::span<const ExpertBytes> batch) {
      sizes->push_back(batch.size());
      for (const ExpertBytes& b : batch) {
        EXPECT_LT(b.i, experts.size());
        EXPECT_TRUE(out[b.i].empty()) << "expert " << b.i << " handed twice";
        out[b.i].assign(b.span, b.span + n);
      }
    }, [&] { meanwhile++; });
    EXPECT_EQ(meanwhile, 1);
    return out;
  };
  const std::vector<std::vector<uint8_t>> want = fetch_all(*plain, ck, layer, experts);
  std::vector<size_t> cold, warm, pread;
  EXPECT_EQ(run(*direct, &cold), want);
  EXPECT_EQ(run(*direct, &warm), want);
  EXPECT_EQ(run(*plain, &pread), want);
  for (size_t k : cold) EXPECT_GT(k, 0u);
  EXPECT_EQ(warm, std::vector<size_t>{experts.size()});
  EXPECT_EQ(pread, std::vector<size_t>(experts.size(), 1));
  EXPECT_EQ(direct->stats().fetched, 2 * experts.size());
}

// The read memory a device backend would pin (DirectSourceOptions::host_memory):
// every span handed to use() lies in memory announced by add(), each buffer
// is announced once, and all of it is removed when the source closes.
std::map<uintptr_t, size_t>& announced() {
  static std::map<uintptr_t, size_t> m;
  return m;
}
int announce_errors = 0;
void on_add(void* p, size_t n) {
  if (!announced().emplace(reinterpret_cast<uintptr_t>(p), n).second) announce_errors++;
}
void on_remove(void* p, size_t n) {
  auto it = announced().find(reinterpret_cast<uintptr_t>(p));
  if (it == announced().end() || it->second != n) announce_errors++;
  else announced().erase(it);
}
bool in_announced(const uint8_t* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = announced().upper_bound(a);
  if (it == announced().begin()) return false;
  --it;
  return a + n <= it->first + it->second;
}

TEST(ExpertSource, HostMemoryHooksSeeEveryReadBuffer) {
  const Checkpoint ck = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  const int layer = ck.config.first_k_dense_replace;
  const uint64_t n = ck.config.expert_span_bytes();
  auto plain = make_pread_expert_source(ck);
  for (const uint64_t cache : {uint64_t(0), uint64_t(64) << 20}) {  // reads into spare buffers only; into slots
    announce_errors = 0;
    {
      DirectSourceOptions d;
      d.cache_bytes = cache;
      d.inflight_bytes = 1ull << 20;
      d.host_memory = {on_add, on_remove};
      auto direct = make_direct_expert_source(ck, d);
      EXPECT_FALSE(announced().empty());
      for (const auto& [at, len] : announced()) {
        EXPECT_EQ(at % kIoAlign, 0u);
        EXPECT_GE(len, n);
      }
      const std::vector<int> experts = {0, 3, 5, 6};
      int outside = 0;
      std::vector<std::vector<uint8_t>> got(experts.size());
      for (int round = 0; round < 2; round++)
        direct->fetch(layer, experts, [&](size_t i, const uint8_t* p) {
          outside += !in_announced(p, n);
          got[i].assign(p, p + n);
        });
      EXPECT_EQ(outside, 0) << "cache " << cache;
      EXPECT_EQ(got, fetch_all(*plain, ck, layer, experts));
    }
    EXPECT_TRUE(announced().empty()) << "cache " << cache;
    EXPECT_EQ(announce_errors, 0);
  }
}

}  // namespace
}  // namespace sluice
