// io/span_stream.h — a fixed sequence of spans read over and over, ahead of use.
//
// The streamed spine is read in the same order on every forward pass: layer
// 0's attention part, its FFN part, ..., the last layer, then the head. A
// SpanStream owns one ring buffer (allocated once, so no page is faulted or
// zeroed twice) and a loader thread with its own SpanReader. The loader reads
// the items of pass p, then of pass p+1, ... into the ring, as far ahead of the
// consumer as the ring has room, with every item's reads submitted at once so
// the device queue stays full across item boundaries. The consumer takes the
// items of a pass in order; taking one releases the one before, whose ring
// space the loader reuses at once.
//
//   SpanStream s(paths, items, /*required=*/n_layers_units, ring_bytes, io);
//   s.begin_pass(/*with_tail=*/true);     // this pass also wants the tail items
//   const uint8_t* const* p = s.acquire(i); // p[j]: span j of item i, landed
//   s.release();                           // or the next acquire/begin_pass
//
// Items [0, required) are read in every pass, items [required, n) only in
// passes that ask for them (the head is not needed by a prefill chunk that
// wants no logits). The loader reads the required items of the next pass before
// that pass has begun, but waits for its begin_pass before reading its tail.
// A pass left unfinished (an exception in the consumer) is skipped by the next
// begin_pass: its remaining items are dropped unread or discarded.
//
// Errors: a failed read (EIO, a short file) fails one item of one pass: the
// acquire of that item throws the read's error, naming the file and offset,
// and the next pass reads the item again (the loader never stops for it). A
// stalled device breaks the stream: every later acquire throws (its reads may
// still land in the ring, so nothing can be read into it again). Nothing is
// ever handed out that did not land completely.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/file_span.h"
#include "io/aligned_buffer.h"
#include "io/span_reader.h"

namespace sluice {

// One unit of the stream: its spans land in one region of the ring.
struct StreamItem {
  std::vector<FileSpan> spans;
};

struct SpanStreamStats {
  uint64_t bytes_read = 0;       // bytes read (alignment padding included)
  uint64_t items_read = 0;
  uint64_t items_dropped = 0;    // read but never used (skipped passes)
  uint64_t read_errors = 0;      // items whose read failed (each failed its pass)
  double consumer_wait_s = 0;    // time acquire() blocked: compute waiting for I/O
  double loader_idle_s = 0;      // time the loader had no read in flight: I/O waiting for ring room
  std::vector<uint64_t> file_bytes;  // bytes read from each file (by file id; a stripe's per-drive figures)
};

class SpanStream {
 public:
  SpanStream(const std::vector<std::string>& paths, std::vector<StreamItem> items, size_t required,
             uint64_t ring_bytes, SpanReaderOptions io = {});
  ~SpanStream();
  SpanStream(const SpanStream&) = delete;
  SpanStream& operator=(const SpanStream&) = delete;

  // Ring bytes one item's spans occupy (each span's aligned superset).
  static uint64_t region_bytes(const StreamItem& item);
  // The smallest ring that always fits the item being computed and the next
  // one: each span is placed contiguously, so one span's worth can be lost
  // where the ring wraps. 2 x the largest item + the largest span.
  static uint64_t min_ring_bytes(const std::vector<StreamItem>& items);

  // Starts the next pass; it reads the tail items when with_tail.
  void begin_pass(bool with_tail);
  // Blocks until item i of the current pass has landed and returns its spans'
  // first bytes (in the item's span order). Releases the item taken before.
  // Items of a pass are taken in increasing order; items passed over are dropped.
  const uint8_t* const* acquire(size_t i);
  // Done with the item taken last.
  void release();

  SpanStreamStats stats() const;

 private:
  struct Entry {
    uint64_t pass = 0;
    size_t item = 0;
    uint64_t arc = 0;       // ring bytes it holds from its first span on, wrap waste included
    int reads_left = 0;
    bool taken = false;     // handed to the consumer at least once
    bool released = false;  // the consumer is done with it (or skipped it)
    std::vector<const uint8_t*> data;
    std::string error;      // a span's read failed: taking it throws this
  };

  void loader();
  void loader_loop(SpanReader& reader);
  bool next_item(uint64_t* pass, size_t* item);  // what the loader reads next, if it may yet
  // Places every span of `item` after the newest entry; false if the ring has no room yet.
  bool place(const StreamItem& item, std::vector<uint64_t>* offsets, uint64_t* arc);
  void free_released();  // frees released, landed entries at the front of the ring
  void release_held();

  std::vector<std::string> paths_;
  std::vector<StreamItem> items_;
  size_t required_;
  AlignedBuffer ring_;
  SpanReaderOptions io_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // entries landed, space freed, a pass begun, stop, error
  std::deque<Entry> entries_;   // in ring order = read order
  // The ring in use is the arc of used_ bytes from head_ on, wrapping at the end.
  uint64_t head_ = 0, used_ = 0;
  std::map<uint64_t, bool> tail_wanted_;  // pass -> with_tail, once begun
  uint64_t consumer_pass_ = 0;  // the current pass (0: none yet)
  size_t consumer_want_ = 0;    // the consumer takes no item of its pass below this
  Entry* held_ = nullptr;       // the entry the consumer holds
  uint64_t load_pass_ = 1;      // where the loader is
  size_t load_item_ = 0;
  bool stop_ = false;
  std::string error_;           // set once the reader broke (a stall): the stream is dead
  bool leak_ring_ = false;      // reads may still be in flight after a stall: never free the ring

  SpanStreamStats stats_;
  std::unique_ptr<SpanReader> reader_;  // the loader's; destroyed (waiting for its reads) before ring_
  std::thread thread_;
};

}  // namespace sluice
