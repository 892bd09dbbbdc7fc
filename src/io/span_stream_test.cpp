// SpanStream: every span handed out holds the file's bytes, whatever the ring
// size, the pass shape (tail or not, items skipped, passes abandoned) or the
// read engine; the loader runs ahead but never reads a tail nobody asked for;
// a read error fails the pass that needs the item (never a hang), and the
// next pass reads it again.
#include "io/span_stream.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/read_fault.h"
#include "io/test_util.h"

namespace sluice {
namespace {

using testing::pattern_bytes;
using testing::Rng;
using testing::ScratchDir;

std::vector<StreamItem> random_items(Rng& rng, int n, uint64_t file_size, uint64_t max_span) {
  std::vector<StreamItem> items(static_cast<size_t>(n));
  for (StreamItem& it : items) {
    const int spans = 1 + int(rng.below(4));
    for (int j = 0; j < spans; j++) {
      FileSpan s;
      s.file = int(rng.below(2));
      s.length = 1 + rng.below(max_span);
      s.offset = rng.below(file_size - s.length);
      it.spans.push_back(s);
    }
  }
  return items;
}

void expect_item(const StreamItem& item, const uint8_t* const* data, const std::vector<std::vector<uint8_t>>& files,
                 const std::string& where) {
  for (size_t j = 0; j < item.spans.size(); j++) {
    const FileSpan& s = item.spans[j];
    ASSERT_NE(data[j], nullptr) << where;
    ASSERT_EQ(std::memcmp(data[j], files[size_t(s.file)].data() + s.offset, s.length), 0) << where << " span " << j;
  }
}

TEST(SpanStream, EveryPassShapeDeliversTheFileBytes) {
  ScratchDir dir;
  const uint64_t size = 6 << 20;
  std::vector<std::vector<uint8_t>> files = {pattern_bytes(size, 1), pattern_bytes(size, 2)};
  const std::vector<std::string> paths = {dir.write("a.bin", files[0]), dir.write("b.bin", files[1])};
  struct Mode {
    bool uring, direct;
  };
  for (Mode mode : {Mode{true, true}, Mode{false, true}, Mode{true, false}}) {
    for (int variant = 0; variant < 3; variant++) {
      Rng rng(uint64_t(17 + variant));
      const int n = 10 + variant * 3;
      const size_t required = size_t(n - 3);
      std::vector<StreamItem> items = random_items(rng, n, size, 300 << 10);
      // The tightest ring the stream accepts, one a little larger, and one that holds everything.
      const uint64_t min_ring = SpanStream::min_ring_bytes(items);
      const uint64_t ring = variant == 0 ? min_ring : variant == 1 ? min_ring + 100000 : 64ull << 20;
      SpanReaderOptions io;
      io.use_io_uring = mode.uring;
      io.use_direct = mode.direct;
      io.queue_depth = 4;
      io.chunk_bytes = 64 << 10;
      SpanStream stream(paths, items, required, ring, io);
      for (int pass = 0; pass < 25; pass++) {
        const bool tail = rng.below(2) == 0;
        stream.begin_pass(tail);
        const size_t end = tail ? items.size() : required;
        const int shape = int(rng.below(4));  // 0,1: every item; 2: skip some; 3: abandon half way
        for (size_t i = 0; i < end; i++) {
          if (shape == 2 && rng.below(3) == 0) continue;
          if (shape == 3 && i == end / 2) break;
          const uint8_t* const* data = stream.acquire(i);
          expect_item(items[i], data, files,
                      "mode " + std::to_string(mode.uring) + std::to_string(mode.direct) + " variant " +
                          std::to_string(variant) + " pass " + std::to_string(pass) + " item " + std::to_string(i));
          if (rng.below(2) == 0) stream.release();
        }
      }
      EXPECT_GT(stream.stats().items_read, 0u);
    }
  }
}

// Polls the loader's counters until `want` items were read or a few seconds pass.
uint64_t wait_items_read(const SpanStream& s, uint64_t want) {
  for (int i = 0; i < 500 && s.stats().items_read < want; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return s.stats().items_read;
}

TEST(SpanStream, NextItemIsReadWhileTheCurrentOneIsHeld) {
  // Sizes chosen so that the held item sits in the middle of the ring when the
  // next, largest one must be placed: with a ring of 2 x the largest item there
  // is room on neither side, and reading would stop until the consumer lets go.
  ScratchDir dir;
  const uint64_t size = 8 << 20;
  std::vector<std::vector<uint8_t>> files = {pattern_bytes(size, 3)};
  const std::vector<std::string> paths = {dir.write("a.bin", files[0])};
  std::vector<StreamItem> items;
  for (uint64_t len : {uint64_t(500000), uint64_t(1000000), uint64_t(1000000), uint64_t(300000), uint64_t(1000000)})
    items.push_back(StreamItem{{FileSpan{0, (len * 3) % (size - len), len}}});
  const uint64_t n = items.size();
  SpanStream stream(paths, items, n, SpanStream::min_ring_bytes(items));
  for (uint64_t pass = 0; pass < 4; pass++) {
    stream.begin_pass(true);
    for (uint64_t i = 0; i < n; i++) {
      expect_item(items[i], stream.acquire(i), files, "item " + std::to_string(i));
      const uint64_t next = pass * n + i + 2;  // items read once item i+1 (or the next pass's first) has landed
      EXPECT_GE(wait_items_read(stream, next), next) << "pass " << pass << " holding item " << i;
    }
  }
}

TEST(SpanStream, RingBelowTheMinimumIsRefused) {
  ScratchDir dir;
  const std::vector<std::string> paths = {dir.write("a.bin", pattern_bytes(1 << 20, 4))};
  std::vector<StreamItem> items = {StreamItem{{FileSpan{0, 0, 400000}}}, StreamItem{{FileSpan{0, 1000, 300000}}}};
  try {
    SpanStream s(paths, items, 2, SpanStream::min_ring_bytes(items) - 4096);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold two items"), std::string::npos) << e.what();
  }
}

TEST(SpanStream, LoaderRunsAheadButWaitsForAPassBeforeItsTail) {
  ScratchDir dir;
  const std::vector<std::string> paths = {dir.write("a.bin", pattern_bytes(4 << 20, 5))};
  std::vector<StreamItem> items;
  for (int i = 0; i < 6; i++) items.push_back(StreamItem{{FileSpan{0, uint64_t(i) * 300000 + 7, 200000}}});
  const size_t required = 4;
  SpanStream stream(paths, items, required, 64 << 20);  // room for everything
  // Before any pass has begun the loader reads the first pass's required items, not its tail.
  EXPECT_EQ(wait_items_read(stream, required), required);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(stream.stats().items_read, required);
  stream.begin_pass(true);
  // Now the tail, and the next pass's required items, are read without being asked for.
  EXPECT_EQ(wait_items_read(stream, items.size() + required), items.size() + required);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(stream.stats().items_read, items.size() + required);
  for (size_t i = 0; i < items.size(); i++) stream.acquire(i);
  stream.begin_pass(false);  // no tail this time: it is never read
  for (size_t i = 0; i < required; i++) stream.acquire(i);
  stream.begin_pass(false);
  EXPECT_EQ(wait_items_read(stream, items.size() + 3 * required), items.size() + 3 * required);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(stream.stats().items_read, items.size() + 3 * required);
  EXPECT_EQ(stream.stats().items_dropped, 0u);
}

// Takes every item of one pass; "" when all matched the file, else the error.
std::string take_pass(SpanStream& stream, const std::vector<StreamItem>& items,
                      const std::vector<std::vector<uint8_t>>& files) {
  stream.begin_pass(true);
  try {
    for (size_t i = 0; i < items.size(); i++) {
      expect_item(items[i], stream.acquire(i), files, "item " + std::to_string(i));
      if (::testing::Test::HasFatalFailure()) return "wrong bytes";
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SpanStream, ReadErrorFailsThePassNamingTheFileAndARestoredFileReadsAgain) {
  ScratchDir dir;
  const uint64_t size = 8 << 20;
  const std::vector<std::vector<uint8_t>> files = {pattern_bytes(size, 6)};
  // Two items at the start, the rest near the end; the ring holds about two items.
  std::vector<StreamItem> items;
  items.push_back(StreamItem{{FileSpan{0, 0, 500000}}});
  items.push_back(StreamItem{{FileSpan{0, 600000, 500000}}});
  for (int i = 0; i < 4; i++) items.push_back(StreamItem{{FileSpan{0, size - 600000 * uint64_t(i + 1), 500000}}});
  for (bool by_rename : {false, true}) {
    SCOPED_TRACE(by_rename ? "restored by rename" : "restored in place");
    const std::string path = dir.write("a.bin", files[0]);
    SpanStream stream({path}, items, items.size(), SpanStream::min_ring_bytes(items));
    EXPECT_EQ(take_pass(stream, items, files), "");
    ASSERT_EQ(truncate(path.c_str(), 2 << 20), 0);
    for (int pass = 0; pass < 2; pass++) {  // every pass fails while the file is short, with a fresh error
      const std::string error = take_pass(stream, items, files);
      EXPECT_NE(error.find(path), std::string::npos) << error;
      EXPECT_NE(error.find("offset"), std::string::npos) << error;
    }
    if (by_rename) {
      const std::string fresh = dir.write("a.bin.new", files[0]);
      ASSERT_EQ(rename(fresh.c_str(), path.c_str()), 0);
    } else {
      dir.write("a.bin", files[0]);
    }
    // The pass in flight may have read ahead while the file was short: it
    // fails or succeeds, and from the next one on every pass succeeds.
    take_pass(stream, items, files);
    for (int pass = 0; pass < 3; pass++) EXPECT_EQ(take_pass(stream, items, files), "") << "pass " << pass;
    EXPECT_GE(stream.stats().read_errors, 2u);
  }
}

// A transient fault (EIO, or a short read) on one item fails the one pass
// that takes it; the item is read again for the next pass, in every engine
// and file mode, and nothing is handed out that did not land.
TEST(SpanStream, InjectedFaultFailsOnePassAndTheNextReadsTheItemAgain) {
  ScratchDir dir;
  const uint64_t size = 4 << 20;
  const std::vector<std::vector<uint8_t>> files = {pattern_bytes(size, 9)};
  const std::string path = dir.write("f.bin", files[0]);
  std::vector<StreamItem> items;
  for (int i = 0; i < 6; i++) items.push_back(StreamItem{{FileSpan{0, uint64_t(i) * 600000 + 5, 300000}}});
  // Inside item 3, past its first chunk's start: a short fault cuts that chunk, then fails its rest.
  const uint64_t at = align_down(items[3].spans[0].offset, kIoAlign) + 8192;
  struct Mode {
    bool uring, direct;
  };
  for (Mode mode : {Mode{true, true}, Mode{false, true}, Mode{true, false}, Mode{false, false}}) {
    for (FaultKind kind : {FaultKind::eio, FaultKind::short_read}) {
      SCOPED_TRACE(std::to_string(mode.uring) + std::to_string(mode.direct) + (kind == FaultKind::eio ? " eio" : " short"));
      clear_read_faults();
      add_read_fault({kind, "/f.bin", at, 100, kind == FaultKind::eio ? 1 : 2});  // armed before the loader starts
      SpanReaderOptions io;
      io.use_io_uring = mode.uring;
      io.use_direct = mode.direct;
      io.queue_depth = 4;
      io.chunk_bytes = 64 << 10;
      SpanStream stream({path}, items, items.size(), SpanStream::min_ring_bytes(items), io);
      stream.begin_pass(true);
      for (size_t i = 0; i < 3; i++) expect_item(items[i], stream.acquire(i), files, "item " + std::to_string(i));
      try {
        stream.acquire(3);
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(path), std::string::npos) << what;
        EXPECT_NE(what.find("offset " + std::to_string(items[3].spans[0].offset)), std::string::npos) << what;
      }
      for (int pass = 0; pass < 3; pass++) EXPECT_EQ(take_pass(stream, items, files), "") << "pass " << pass;
      EXPECT_EQ(stream.stats().read_errors, 1u);
    }
  }
  clear_read_faults();
}

TEST(SpanStream, DestructionWhileReadingIsSafe) {
  ScratchDir dir;
  const std::vector<std::string> paths = {dir.write("a.bin", pattern_bytes(8 << 20, 7))};
  std::vector<StreamItem> items;
  for (int i = 0; i < 8; i++) items.push_back(StreamItem{{FileSpan{0, uint64_t(i) << 20, 1 << 20}}});
  for (int k = 0; k < 5; k++) {
    SpanStream stream(paths, items, items.size(), 16 << 20);
    stream.begin_pass(true);
    if (k % 2) stream.acquire(0);
  }
}

}  // namespace
}  // namespace sluice
