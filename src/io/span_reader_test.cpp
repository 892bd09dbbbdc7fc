#include "io/span_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/read_fault.h"
#include "io/page_cache.h"
#include "io/test_util.h"

namespace sluice {
namespace {

using testing::Rng;
using testing::ScratchDir;

// The four engine/file-mode combinations every behaviour must hold for.
struct Mode {
  const char* name;
  bool uring, direct;
};
const Mode kModes[] = {
    {"uring+direct", true, true},
    {"uring+buffered", true, false},
    {"pread+direct", false, true},
    {"pread+buffered", false, false},
};

SpanReaderOptions options_for(const Mode& m, int qd = 8, uint64_t chunk = 64 << 10) {
  SpanReaderOptions o;
  o.use_io_uring = m.uring;
  o.use_direct = m.direct;
  o.queue_depth = qd;
  o.chunk_bytes = chunk;
  o.timeout_ms = 10000;
  return o;
}

// A scratch file of `bytes` pattern bytes (`seed`), and body(reader, data)
// run once per mode with a reader over it: depth `qd`, chunks of `chunk`.
template <class Body>
void in_each_mode(uint64_t bytes, uint64_t seed, int qd, uint64_t chunk, const Body& body) {
  ScratchDir dir;
  const std::vector<uint8_t> data = testing::pattern_bytes(bytes, seed);
  const std::string p = dir.write("f.bin", data);
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    SpanReader reader({p}, options_for(m, qd, chunk));
    body(reader, data);
  }
}

std::vector<uint8_t> pread_span(const std::string& path, uint64_t off, uint64_t len) {
  std::vector<uint8_t> v(len);
  int fd = open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(pread(fd, v.data(), len, off_t(off)), ssize_t(len));
  close(fd);
  return v;
}

// Asserts that the exception thrown by f names every one of `parts`.
template <class F>
void expect_error_naming(F f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(SpanReader, RandomSpansMatchPreadInEveryMode) {
  ScratchDir dir;
  // Odd sizes: the last aligned block of each file is partial.
  auto a = dir.write("a.bin", testing::pattern_bytes(3 * 1048576 + 1234, 1));
  auto b = dir.write("b.bin", testing::pattern_bytes(700001, 2));
  std::vector<std::string> paths = {a, b};
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    SpanReader reader(paths, options_for(m));
    EXPECT_EQ(reader.using_io_uring(), testing::uring_expected(m.uring));
    if (!m.direct) {
      EXPECT_FALSE(reader.file_is_direct(0));
    }
    Rng rng(42);
    struct Want {
      int file;
      uint64_t off, len;
      std::vector<uint8_t> dest;  // caller buffer (empty: reader-owned)
      AlignedBuffer aligned;      // zero-copy destination
    };
    std::map<uint64_t, Want> want;
    for (int i = 0; i < 120; i++) {
      Want w;
      w.file = int(rng.below(2));
      uint64_t size = reader.file_size(w.file);
      w.len = rng.below(4) == 0 ? 1 + rng.below(size / 2) : 1 + rng.below(9000);
      w.off = rng.below(size - w.len + 1);
      if (i % 7 == 0) w.off = size - w.len;  // ends exactly at end of file
      std::span<uint8_t> dest;
      switch (i % 3) {
        case 0:
          break;
        case 1:
          w.aligned = AlignedBuffer(SpanReader::direct_capacity(w.len));
          dest = w.aligned.bytes();
          break;
        case 2:
          w.dest.resize(w.len + 1);  // misaligned by 1 on purpose
          dest = std::span<uint8_t>(w.dest.data() + 1, w.len);
          break;
      }
      uint64_t t = reader.submit(w.file, w.off, w.len, dest);
      want.emplace(t, std::move(w));
    }
    EXPECT_EQ(reader.outstanding(), want.size());
    while (reader.outstanding() > 0) {
      Completed c = reader.wait_any();
      auto it = want.find(c.ticket);
      ASSERT_NE(it, want.end());
      const Want& w = it->second;
      ASSERT_EQ(c.length, w.len);
      auto expect = pread_span(paths[size_t(w.file)], w.off, w.len);
      ASSERT_EQ(std::memcmp(c.data, expect.data(), w.len), 0) << "ticket " << c.ticket;
      if (!w.aligned.empty()) {
        EXPECT_EQ(c.data, w.aligned.data() + w.off % kIoAlign);
      } else if (!w.dest.empty()) {
        EXPECT_EQ(c.data, w.dest.data() + 1);
      } else {
        EXPECT_FALSE(c.owned.empty());
      }
      want.erase(it);
    }
    EXPECT_TRUE(want.empty());
    ReadStats s = reader.stats();
    EXPECT_EQ(s.spans, 120u);
    EXPECT_GT(s.ops, 120u);  // the big spans were split into 64 KiB chunks
    EXPECT_GE(s.bytes_read, s.bytes_delivered);
    EXPECT_GT(s.busy_ns, 0u);
  }
}

TEST(SpanReader, AlignedDestinationIsZeroCopyMisalignedIsCopied) {
  ScratchDir dir;
  auto p = dir.write("f.bin", testing::pattern_bytes(200000, 3));
  SpanReader reader({p}, options_for(kModes[0]));
  const uint64_t off = 12345, len = 50000;
  auto expect = pread_span(p, off, len);

  AlignedBuffer slot(SpanReader::direct_capacity(len));
  Completed c = reader.wait(reader.submit(0, off, len, slot.bytes()));
  EXPECT_EQ(c.data, slot.data() + off % kIoAlign);
  EXPECT_TRUE(c.owned.empty());
  EXPECT_EQ(std::memcmp(c.data, expect.data(), len), 0);
  EXPECT_EQ(reader.stats().bytes_copied, 0u);

  std::vector<uint8_t> plain(len);
  c = reader.wait(reader.submit(0, off, len, plain));
  EXPECT_EQ(c.data, plain.data());
  EXPECT_EQ(plain, expect);
  EXPECT_EQ(reader.stats().bytes_copied, len);

  // An aligned destination too short for the superset still works, via a copy.
  AlignedBuffer exact(len);
  c = reader.wait(reader.submit(0, off, len, exact.bytes()));
  EXPECT_EQ(c.data, exact.data());
  EXPECT_EQ(std::memcmp(exact.data(), expect.data(), len), 0);

  std::vector<uint8_t> small(len - 1);
  expect_error_naming([&] { reader.submit(0, off, len, small); }, {p, "smaller"});
}

TEST(SpanReader, ManyConcurrentReadsWaitedOutOfOrder) {
  in_each_mode(4 << 20, 4, 32, 16 << 10, [](SpanReader& reader, const std::vector<uint8_t>& data) {
    Rng rng(7);
    std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> sub;
    for (int i = 0; i < 600; i++) {
      uint64_t len = 1 + rng.below(100000);
      uint64_t off = rng.below(data.size() - len);
      sub.push_back({reader.submit(0, off, len), {off, len}});
    }
    // Newest first with wait(), then the rest as they come with poll().
    for (size_t i = sub.size(); i-- > 300;) {
      Completed c = reader.wait(sub[i].first);
      auto [off, len] = sub[i].second;
      ASSERT_EQ(c.length, len);
      ASSERT_EQ(std::memcmp(c.data, data.data() + off, len), 0);
    }
    size_t got = 0;
    while (got < 300) {
      Completed c;
      if (!reader.poll(&c)) continue;
      auto [off, len] = sub[c.ticket - sub[0].first].second;
      ASSERT_EQ(std::memcmp(c.data, data.data() + off, len), 0);
      got++;
    }
    EXPECT_EQ(reader.outstanding(), 0u);
    Completed none;
    EXPECT_FALSE(reader.poll(&none));
    expect_error_naming([&] { reader.wait_any(); }, {"no span outstanding"});
  });
}

// One read in flight, one chunk per span: completion order is issue order, so
// the order spans come back shows what the queue did.
TEST(SpanReader, UrgentSpansOvertakeQueuedOnesAndUnstartedSpansCancel) {
  in_each_mode(1 << 20, 5, 1, 64 << 10, [](SpanReader& reader, const std::vector<uint8_t>& data) {
    const uint64_t a = reader.submit(0, 0, 5000);          // issued at once
    const uint64_t b = reader.submit(0, 100000, 5000);
    const uint64_t c = reader.submit(0, 200000, 5000);
    const uint64_t d = reader.submit(0, 300000, 5000, {}, /*urgent=*/true);
    const uint64_t e = reader.submit(0, 400000, 5000, {}, /*urgent=*/true);
    EXPECT_FALSE(reader.cancel(a));  // already reading
    EXPECT_TRUE(reader.cancel(c));
    EXPECT_FALSE(reader.cancel(c));
    std::vector<uint64_t> order;
    while (reader.outstanding() > 0) {
      Completed got = reader.wait_any();
      const uint64_t off = got.ticket == a ? 0 : got.ticket == b ? 100000 : got.ticket == d ? 300000 : 400000;
      ASSERT_EQ(std::memcmp(got.data, data.data() + off, 5000), 0);
      order.push_back(got.ticket);
    }
    EXPECT_EQ(order, (std::vector<uint64_t>{a, d, e, b}));
    const ReadStats s = reader.stats();
    EXPECT_EQ(s.cancelled, 1u);
    EXPECT_EQ(s.spans, 4u);
    EXPECT_GT(s.depth_ns, 0u);
    EXPECT_LE(s.depth_ns, s.busy_ns + 1000);  // depth 1: the integral is the busy time
    expect_error_naming([&] { reader.wait(c); }, {"unknown"});
  });
}

// A started speculative span yields to an urgent one between its chunks, and
// cut() stops what of it is not issued yet: it comes back marked, with no data.
TEST(SpanReader, UrgentSpansOvertakeAPartlyIssuedOneAndCutStopsIt) {
  in_each_mode(1 << 20, 6, 1, 64 << 10, [](SpanReader& reader, const std::vector<uint8_t>& data) {
    const uint64_t a = reader.submit(0, 0, 3 * 65536);  // three chunks, the first issued at once
    const uint64_t d = reader.submit(0, 500000, 5000, {}, /*urgent=*/true);
    std::vector<uint64_t> order;
    while (reader.outstanding() > 0) {
      Completed got = reader.wait_any();
      const uint64_t off = got.ticket == a ? 0 : 500000;
      ASSERT_EQ(std::memcmp(got.data, data.data() + off, got.length), 0);
      order.push_back(got.ticket);
    }
    EXPECT_EQ(order, (std::vector<uint64_t>{d, a}));

    const uint64_t b = reader.submit(0, 65536, 3 * 65536);  // started
    const uint64_t c = reader.submit(0, 700000, 5000);      // not started
    const uint64_t e = reader.submit(0, 800000, 5000);
    EXPECT_TRUE(reader.cut(b));
    EXPECT_FALSE(reader.cut(b));
    EXPECT_TRUE(reader.cut(c));  // nothing issued: withdrawn, never handed back
    std::vector<uint64_t> got_tickets;
    while (reader.outstanding() > 0) {
      Completed got = reader.wait_any();
      got_tickets.push_back(got.ticket);
      if (got.ticket == b) {
        EXPECT_TRUE(got.cut);
        EXPECT_EQ(got.data, nullptr);
      } else {
        EXPECT_FALSE(got.cut);
        ASSERT_EQ(std::memcmp(got.data, data.data() + 800000, 5000), 0);
      }
    }
    EXPECT_EQ(got_tickets, (std::vector<uint64_t>{b, e}));
    EXPECT_FALSE(reader.cut(e));  // finished
    const ReadStats s = reader.stats();
    EXPECT_EQ(s.cut, 1u);
    EXPECT_EQ(s.cancelled, 1u);
    EXPECT_EQ(s.spans, 3u);  // a, d, e: a cut span is not delivered
    EXPECT_EQ(s.bytes_not_read, 2u * 65536 + SpanReader::direct_bytes(700000, 5000));  // b's last two chunks, all of c
  });
}

// progress() keeps the queue moving without handing anything back.
TEST(SpanReader, ProgressIssuesQueuedChunksAndKeepsResultsForPoll) {
  in_each_mode(1 << 20, 7, 1, 64 << 10, [](SpanReader& reader, const std::vector<uint8_t>& data) {
    for (int i = 0; i < 3; i++) reader.submit(0, uint64_t(i) * 100000, 5000);
    for (int spins = 0; reader.stats().spans < 3 && spins < 10000000; spins++) reader.progress();
    EXPECT_EQ(reader.stats().spans, 3u);  // depth 1: the second and third were issued by progress()
    EXPECT_EQ(reader.outstanding(), 3u);
    for (int i = 0; i < 3; i++) {
      Completed c;
      ASSERT_TRUE(reader.poll(&c));
      ASSERT_EQ(std::memcmp(c.data, data.data() + (c.ticket - 1) * 100000, 5000), 0);
    }
  });
}

TEST(SpanReader, SpanPastEndOfFileIsAnErrorNamingFileOffsetLength) {
  ScratchDir dir;
  auto p = dir.write("short.bin", testing::pattern_bytes(10000, 5));
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    SpanReader reader({p}, options_for(m));
    uint64_t good1 = reader.submit(0, 0, 5000);
    uint64_t bad = reader.submit(0, 9000, 2000);
    uint64_t good2 = reader.submit(0, 5000, 5000);
    EXPECT_EQ(reader.wait(good1).length, 5000u);
    expect_error_naming([&] { reader.wait(bad); }, {p, "9000", "2000", "short read"});
    EXPECT_EQ(reader.wait(good2).length, 5000u);  // a failed span disturbs no other
  }
}

TEST(SpanReader, FileTruncatedAfterOpenGivesErrorNotHang) {
  ScratchDir dir;
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    auto p = dir.write("t.bin", testing::pattern_bytes(3 << 20, 6));
    SpanReader reader({p}, options_for(m, 4, 256 << 10));
    ASSERT_EQ(truncate(p.c_str(), 1 << 20), 0);
    uint64_t t = reader.submit(0, 1000, (2 << 20) + 5);
    expect_error_naming([&] { reader.wait(t); }, {p, "offset 1000", "length 2097157", "short read"});
    // Still usable afterwards for bytes that exist.
    auto expect = pread_span(p, 100, 5000);
    Completed c = reader.wait(reader.submit(0, 100, 5000));
    EXPECT_EQ(std::memcmp(c.data, expect.data(), 5000), 0);
  }
}

TEST(SpanReader, ReadErrorIsReportedWithTheSystemMessage) {
  ScratchDir dir;  // reading a directory fails with EISDIR: a stand-in for EIO
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    SpanReader reader({dir.path}, options_for(m));
    uint64_t t = reader.submit(0, 0, 100);
    expect_error_naming([&] { reader.wait_any(); },
                        {dir.path, "offset 0 length 100", std::strerror(EISDIR)});
    (void)t;
  }
}

// The fault seam (base/read_fault.h) fails reads in every engine and file
// mode: the failed span throws a SpanError naming its ticket, the file and the
// offset; no other span is disturbed, and once the fault is spent the same
// span reads fine from the same reader.
TEST(SpanReader, InjectedFaultsFailOneSpanAndTheReaderGoesOn) {
  in_each_mode(1 << 20, 12, 8, 64 << 10, [](SpanReader& reader, const std::vector<uint8_t>& data) {
    for (FaultKind kind : {FaultKind::eio, FaultKind::short_read}) {
      clear_read_faults();
      // 2 reads: a short fault first cuts a chunk, then fails its remainder.
      add_read_fault({kind, "/f.bin", 300000, 10, 2});
      const uint64_t good1 = reader.submit(0, 0, 200000);
      const uint64_t bad = reader.submit(0, 290000, 20000);
      const uint64_t good2 = reader.submit(0, 500000, 200000);
      try {
        reader.wait(bad);
        ADD_FAILURE() << "no error thrown";
      } catch (const SpanError& e) {
        EXPECT_EQ(e.ticket, bad);
        const std::string what = e.what();
        EXPECT_NE(what.find(reader.path(0)), std::string::npos) << what;
        EXPECT_NE(what.find("offset 290000"), std::string::npos) << what;
        EXPECT_EQ(what.find(reader.path(0)), what.rfind(reader.path(0))) << "the file is named once: " << what;
      }
      EXPECT_EQ(std::memcmp(reader.wait(good1).data, data.data(), 200000), 0);
      EXPECT_EQ(std::memcmp(reader.wait(good2).data, data.data() + 500000, 200000), 0);
      EXPECT_GE(read_faults_fired(), 1u);
      EXPECT_TRUE(read_health().failing);
      clear_read_faults();
      const Completed c = reader.wait(reader.submit(0, 290000, 20000));
      EXPECT_EQ(std::memcmp(c.data, data.data() + 290000, 20000), 0);
    }
  });
}

// A file truncated under the reader and then restored by a rename (a new
// inode: the reader's descriptor still sees the truncated one) reads fine
// again: a failed read reopens the path.
TEST(SpanReader, AFileReplacedAfterAFailedReadIsReopened) {
  ScratchDir dir;
  const std::vector<uint8_t> data = testing::pattern_bytes(1 << 20, 13);
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    const std::string p = dir.write("r.bin", data);
    SpanReader reader({p}, options_for(m));
    ASSERT_EQ(truncate(p.c_str(), 100000), 0);
    expect_error_naming([&] { reader.wait(reader.submit(0, 200000, 5000)); }, {p, "short read"});
    const std::string fresh = dir.write("r.bin.new", data);
    ASSERT_EQ(rename(fresh.c_str(), p.c_str()), 0);
    const Completed c = reader.wait(reader.submit(0, 200000, 5000));
    EXPECT_EQ(std::memcmp(c.data, data.data() + 200000, 5000), 0);
  }
}

// A read that never completes (a FIFO nobody writes stands in for a hung
// device) must end in an error after timeout_ms, not a hang.
TEST(SpanReader, StalledReadTimesOutWithAnError) {
  ScratchDir dir;
  std::string fifo = dir.path + "/stall.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int keep_open = open(fifo.c_str(), O_RDWR);  // a writer that never writes
  ASSERT_GE(keep_open, 0);
  {
    SpanReaderOptions o = options_for(kModes[0]);
    o.timeout_ms = 200;
    SpanReader reader({fifo}, o);
    if (!reader.using_io_uring()) {
      close(keep_open);
      GTEST_SKIP() << "pread on a FIFO fails at once (ESPIPE); the stall needs io_uring";
    }
    uint64_t t = reader.submit(0, 0, 4096);
    expect_error_naming([&] { reader.wait(t); }, {"no read completed in 200 ms", fifo});
    expect_error_naming([&] { reader.submit(0, 0, 10); }, {"unusable"});
  }  // destruction gives up on the stalled read after timeout_ms, keeping its buffer
  close(keep_open);
}

// Each device has its own queue: a stalled drive (a FIFO nobody writes yet,
// depth 1) holds only its own spans back; a span of another device submitted
// behind them is read at once. (With one shared queue of depth 1 it would wait.)
TEST(SpanReader, ADeviceWithItsQueueFullHoldsBackOnlyItsOwnSpans) {
  ScratchDir dir;
  const std::vector<uint8_t> data = testing::pattern_bytes(1 << 20, 9);
  const std::string file = dir.write("f.bin", data);
  const std::string fifo = dir.path + "/drive.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int writer = open(fifo.c_str(), O_RDWR);  // writes nothing until the end
  ASSERT_GE(writer, 0);
  {
    SpanReaderOptions o = options_for(kModes[0], /*qd=*/1);
    o.device_depths = {1};
    o.file_devices = {0, 1};
    o.timeout_ms = 5000;
    SpanReader reader({file, fifo}, o);
    if (!reader.using_io_uring()) {
      close(writer);
      GTEST_SKIP() << "pread on a FIFO fails at once (ESPIPE); the stall needs io_uring";
    }
    EXPECT_EQ(reader.file_device(0), 0);
    EXPECT_EQ(reader.file_device(1), 1);
    const uint64_t stalled = reader.submit(1, 0, 4096);
    const uint64_t queued = reader.submit(1, 0, 4096);
    const uint64_t a = reader.submit(0, 300000, 5000);
    EXPECT_EQ(reader.in_flight(1), 1);  // its depth
    EXPECT_EQ(reader.in_flight(0), 1);
    EXPECT_EQ(reader.queued_bytes(1), 2u * 4096);  // the stalled read and the one behind it
    Completed got = reader.wait(a);
    ASSERT_EQ(std::memcmp(got.data, data.data() + 300000, 5000), 0);
    EXPECT_EQ(reader.queued_bytes(0), 0u);
    EXPECT_TRUE(reader.cancel(queued));  // still waiting for the stalled drive's slot
    EXPECT_EQ(reader.queued_bytes(1), 4096u);
    const std::vector<uint8_t> bytes = testing::pattern_bytes(4096, 10);
    ASSERT_EQ(write(writer, bytes.data(), bytes.size()), 4096);
    got = reader.wait(stalled);
    ASSERT_EQ(got.length, 4096u);
    EXPECT_EQ(std::memcmp(got.data, bytes.data(), 4096), 0);
    EXPECT_EQ(reader.in_flight(1), 0);
    EXPECT_EQ(reader.queued_bytes(1), 0u);
  }
  close(writer);
  expect_error_naming([&] {
    SpanReaderOptions o;
    o.device_depths = {4};
    o.file_devices = {2};
    SpanReader r({file}, o);
  }, {"no device 2", file});
}

// A span held by two files on two devices (a stripe's copies): its chunks
// are read from both, the bytes are the span's, and a copy whose offset sits
// elsewhere in its 4096-byte block is left out. A chunk failing on the copy
// fails the span naming that file (SpanError::file), not the first one.
TEST(SpanReader, ASpanWithCopiesIsReadFromEveryCopysDevice) {
  ScratchDir dir;
  const std::vector<uint8_t> data = testing::pattern_bytes(1 << 20, 21);
  std::vector<uint8_t> shifted(data.size() + 8192, 0);  // the span at +8192 in the second copy
  std::memcpy(shifted.data() + 8192, data.data(), data.size());
  const std::string a = dir.write("a.bin", data), b = dir.write("b_copy.bin", shifted);
  for (const Mode& m : {kModes[0], kModes[2]}) {
    SCOPED_TRACE(m.name);
    SpanReaderOptions o = options_for(m, /*qd=*/2, /*chunk=*/64 << 10);
    o.device_depths = {2};
    o.file_devices = {0, 1};
    SpanReader reader({a, b}, o);
    const bool direct = reader.file_is_direct(0) && reader.file_is_direct(1);
    const FileSpan copies[] = {{0, 4096, 900000}, {1, 4096 + 8192, 900000}};
    Completed c = reader.wait(reader.submit_copies(copies));
    ASSERT_EQ(c.length, 900000u);
    EXPECT_EQ(std::memcmp(c.data, data.data() + 4096, 900000), 0);
    if (direct) {  // copies join only O_DIRECT reads
      EXPECT_GT(reader.file_bytes_read(0), 0u);
      EXPECT_GT(reader.file_bytes_read(1), 0u);
      EXPECT_LT(reader.file_bytes_read(0), 900000u) << "the first copy read it all";
    }
    // Offsets at different places in their blocks: the copy is left out.
    const uint64_t before = reader.file_bytes_read(1);
    const FileSpan unaligned[] = {{0, 100, 300000}, {1, 8192 + 200, 300000}};
    c = reader.wait(reader.submit_copies(unaligned));
    EXPECT_EQ(std::memcmp(c.data, data.data() + 100, 300000), 0);
    EXPECT_EQ(reader.file_bytes_read(1), before);
    if (!direct) continue;
    clear_read_faults();
    add_read_fault({FaultKind::eio, "/b_copy.bin", 8192, 1 << 20, -1});
    try {
      reader.wait(reader.submit_copies(copies));
      ADD_FAILURE() << "no error thrown";
    } catch (const SpanError& e) {
      EXPECT_EQ(e.file, 1);
      EXPECT_NE(std::string(e.what()).find(b), std::string::npos) << e.what();
    }
    clear_read_faults();
  }
}

TEST(SpanReader, OpenErrorsNameThePath) {
  expect_error_naming([] { SpanReader r({"/nonexistent/sluice/x.bin"}); },
                      {"/nonexistent/sluice/x.bin", "cannot open"});
  SpanReaderOptions bad;
  bad.chunk_bytes = 1000;
  expect_error_naming([&] { SpanReader r({}, bad); }, {"chunk_bytes"});
}

TEST(SpanReader, EnvironmentForcesFallbacks) {
  ScratchDir dir;
  auto p = dir.write("f.bin", testing::pattern_bytes(50000, 8));
  // Restore whatever the caller's environment said afterwards.
  std::string saved[2];
  bool had[2];
  const char* names[2] = {"SLUICE_NO_URING", "SLUICE_NO_DIRECT"};
  for (int i = 0; i < 2; i++) {
    const char* v = std::getenv(names[i]);
    had[i] = v != nullptr;
    if (v) saved[i] = v;
    setenv(names[i], "1", 1);
  }
  {
    SpanReader reader({p});
    EXPECT_FALSE(reader.using_io_uring());
    EXPECT_FALSE(reader.file_is_direct(0));
    auto expect = pread_span(p, 777, 40000);
    Completed c = reader.wait(reader.submit(0, 777, 40000));
    EXPECT_EQ(std::memcmp(c.data, expect.data(), 40000), 0);
  }
  for (int i = 0; i < 2; i++) {
    if (had[i])
      setenv(names[i], saved[i].c_str(), 1);
    else
      unsetenv(names[i]);
  }
  SpanReader reader({p});
  EXPECT_EQ(reader.using_io_uring(), testing::uring_expected(true));
}

TEST(SpanReader, ZeroLengthSpanCompletesAtOnce) {
  ScratchDir dir;
  auto p = dir.write("f.bin", testing::pattern_bytes(100, 9));
  SpanReader reader({p});
  Completed c = reader.wait(reader.submit(0, 50, 0));
  EXPECT_EQ(c.length, 0u);
}

TEST(SpanReader, DestructionWithReadsInFlightIsSafe) {
  ScratchDir dir;
  auto p = dir.write("f.bin", testing::pattern_bytes(2 << 20, 10));
  for (const Mode& m : kModes) {
    SpanReader reader({p}, options_for(m, 16, 64 << 10));
    for (int i = 0; i < 50; i++) reader.submit(0, uint64_t(i) * 1000, 1 << 20);
  }  // ~SpanReader waits for the kernel before freeing buffers (ASan checks)
}

// Page cache: after reads, none of the read range may be resident. On a disk
// file system the file is opened O_DIRECT; where it is not (or when forced)
// the buffered path must drop the pages itself.
TEST(SpanReader, ReadsLeaveThePageCacheClean) {
  ScratchDir dir;
  // Large enough that readahead past a span's end (up to read_ahead_kb, 8 MB
  // on some machines) stays inside the file and would be counted.
  const uint64_t size = 40 << 20;
  auto p = dir.write("cache.bin", testing::pattern_bytes(size, 11));
  const size_t pages = size / page_bytes();

  // The check itself must be able to fail: a plain buffered read caches pages.
  drop_cached_pages(p);
  ASSERT_EQ(resident_pages(p), 0u) << dir.path << " cannot drop pages (tmpfs?)";
  pread_span(p, 0, size);
  ASSERT_GT(resident_pages(p), pages / 2);
  drop_cached_pages(p);
  ASSERT_EQ(resident_pages(p), 0u);

  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    SpanReader reader({p}, options_for(m, 8, 256 << 10));
    Rng rng(12);
    for (int i = 0; i < 24; i++) {  // spans anywhere in the first 16 MB
      uint64_t len = 1 + rng.below(3 << 20);
      reader.submit(0, rng.below((16 << 20) - len), len);
    }
    while (reader.outstanding()) reader.wait_any();
    size_t resident = resident_pages(p);
    if (reader.file_is_direct(0)) {
      EXPECT_EQ(resident, 0u) << "O_DIRECT reads populated the page cache";
    } else {
      EXPECT_EQ(resident, 0u) << "buffered fallback left pages (readahead?)";
    }
    drop_cached_pages(p);  // next mode starts clean even if this one failed
  }
}

TEST(PageCache, ResidentPagesCountsARange) {
  ScratchDir dir;
  auto p = dir.write("r.bin", testing::pattern_bytes(1 << 20, 13));
  drop_cached_pages(p);
  ASSERT_EQ(resident_pages(p), 0u);
  pread_span(p, 0, 64 << 10);
  size_t in_head = resident_pages(p, 0, 64 << 10);
  EXPECT_EQ(in_head, (64u << 10) / page_bytes());
  // Readahead may cache a little beyond, but not the far end of the file.
  EXPECT_EQ(resident_pages(p, 768 << 10, 256 << 10), 0u);
  EXPECT_EQ(resident_pages(p, 5 << 20, 10), 0u);  // past the end: nothing
  expect_error_naming([] { resident_pages("/nonexistent/sluice/y"); }, {"/nonexistent/sluice/y"});
}

}  // namespace
}  // namespace sluice
