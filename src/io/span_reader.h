// io/span_reader.h — reads byte spans of local files at the device's bandwidth.
//
// A span is (file, offset, length): one routed expert (~17.5 MB in K3) or one
// spine tensor. Each span is read as its 4096-aligned superset with O_DIRECT,
// so expert bytes never enter the page cache, and the caller gets a pointer to
// the inner slice. Many reads are kept in flight (queue_depth operations, the
// same meaning as fio's iodepth); a large span is split into chunk_bytes reads
// submitted together so a single expert also gets device parallelism.
//
// The API is completion driven: submit() returns a ticket at once, and
// wait_any()/poll() hand back each span as soon as all of its bytes have
// landed, so the caller computes on one expert while others are still read.
// Spans complete in whatever order the device finishes them; a caller that
// needs a fixed combination order must impose it itself.
//
// Engines: io_uring when io_uring_queue_init works, else pread on a few worker
// threads (seccomp, gVisor, old kernels). Files are opened O_DIRECT; where the
// file system refuses (EINVAL at open, or at the first read) that file is read
// buffered and each span's pages are dropped with posix_fadvise(DONTNEED) after
// the read. Both fallbacks can be forced: options, or the environment
// variables SLUICE_NO_URING=1 and SLUICE_NO_DIRECT=1.
//
// Errors (EIO, a file that ends before the span does, a stalled device) are
// thrown as sluice::Error naming the file, offset and length, from the
// wait/poll call that would have returned that span (a SpanError, naming its
// ticket, for a failed span: the reader goes on, and the file is reopened
// before its next read). Never garbage, never a hang: a wait that sees no
// completion for timeout_ms throws, and the reader is unusable after that.
//
// Several drives (a stripe, io/stripe.h): each file belongs to a device, and
// each device has its own queue of reads in flight (its own depth), filled in
// submission order among that device's spans. A drive that is slow, or busy
// with many spans, then never holds back reads of the others: with one shared
// queue its chunks would take every slot and leave the other drives idle.
//
// One thread owns a SpanReader; it is not thread safe.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_span.h"
#include "io/aligned_buffer.h"

namespace sluice {

struct SpanReaderOptions {
  int queue_depth = 16;                // read operations in flight (device 0's)
  // Further devices 1..N (a stripe's drives): device d's own depth is
  // device_depths[d-1]; file_devices[i] is the device of the constructor's
  // i-th path (0 when not given). Reads in flight in all: the sum.
  std::vector<int> device_depths;
  std::vector<int> file_devices;
  // Device d's read rate relative to the others (empty or 0: 1): where a
  // span with copies sends each chunk (submit_copies).
  std::vector<double> device_weights;
  uint64_t chunk_bytes = 4ull << 20;   // split spans into reads of this size (multiple of 4096)
  bool use_io_uring = true;            // false: pread worker threads
  bool use_direct = true;              // false: buffered reads + DONTNEED
  int pread_threads = 4;               // worker threads of the pread engine
  int timeout_ms = 60000;              // a wait with no completion for this long throws
};

struct ReadStats {
  uint64_t spans = 0;            // spans completed successfully
  uint64_t ops = 0;              // read operations completed (chunks and retries)
  uint64_t bytes_read = 0;       // bytes moved from files, alignment padding included
  uint64_t bytes_delivered = 0;  // span bytes handed to callers
  uint64_t bytes_copied = 0;     // span bytes copied out of bounce buffers
  uint64_t busy_ns = 0;          // wall time with at least one read in flight
  uint64_t depth_ns = 0;         // reads in flight integrated over time: / wall ns = mean depth
  uint64_t cancelled = 0;        // spans cancel() withdrew before any byte was read
  uint64_t cut = 0;              // started spans cut() stopped short
  uint64_t bytes_not_read = 0;   // superset bytes cancel() and cut() saved
};

// One finished span. `data` points at its first byte and stays valid while the
// destination lives: the caller's buffer, or `owned` when submit() got none.
struct Completed {
  uint64_t ticket = 0;
  const uint8_t* data = nullptr;
  uint64_t length = 0;
  AlignedBuffer owned;
  bool cut = false;  // stopped by cut(): data is null, the destination is free again
};

// A span that failed to read (EIO, a short file): thrown by wait_any, poll
// and wait in place of its Completed, naming its ticket. The reader stays
// usable; the next read of that file reopens it (a repaired or replaced file
// then reads fine).
struct SpanError : Error {
  SpanError(const std::string& msg, uint64_t t, int f = -1) : Error(msg), ticket(t), file(f) {}
  uint64_t ticket = 0;
  int file = -1;  // the file whose read failed (a span with copies reads from several)
};

// Whether this process may use io_uring (seccomp and gVisor often forbid it).
bool io_uring_available();

class SpanReader {
 public:
  explicit SpanReader(const std::vector<std::string>& paths, SpanReaderOptions options = {});
  ~SpanReader();
  SpanReader(const SpanReader&) = delete;
  SpanReader& operator=(const SpanReader&) = delete;

  // Opens one more file on `device` (0..device_depths.size()); returns its
  // id (ids count up from 0 in open order).
  int add_file(const std::string& path, int device = 0);
  int file_device(int file) const;
  int file_count() const;
  const std::string& path(int file) const;
  uint64_t file_size(int file) const;  // as of open
  bool file_is_direct(int file) const;
  bool using_io_uring() const;
  const SpanReaderOptions& options() const;

  // Bytes of the aligned superset that holds [offset, offset+length).
  static uint64_t direct_bytes(uint64_t offset, uint64_t length);
  // A destination this large (and 4096-aligned) takes any span of `length`
  // bytes without a copy, whatever its offset. Size expert cache slots with it.
  static uint64_t direct_capacity(uint64_t length);

  // Starts reading [offset, offset+length) of `file`; returns its ticket.
  // dest empty: the reader allocates the destination and hands it over in
  //   Completed::owned.
  // dest 4096-aligned and at least direct_bytes(offset, length) long: the
  //   aligned superset is read straight into it (zero copies); the span starts
  //   at dest + offset % 4096 and the bytes around it are overwritten too.
  // otherwise dest must hold `length` bytes: the superset goes through a bounce
  //   buffer and the span is copied to dest[0, length).
  // The destination must stay alive and untouched until the span completes.
  // urgent: its chunks go ahead of every chunk of a non-urgent span not yet
  // issued, a partly issued span's rest included (a read the caller waits for
  // overtakes speculative ones); else FIFO.
  uint64_t submit(int file, uint64_t offset, uint64_t length, std::span<uint8_t> dest = {}, bool urgent = false);
  // The same span held by several files (a stripe's copies: copies[0] as in
  // submit, then the others, each of the same length): every chunk is read
  // from whichever copy's device would finish it first, (bytes in flight +
  // the chunk) / the device's weight, waiting for a slot there when it has
  // none, so one span spreads over idle drives instead of waiting on the
  // busiest, and a slow drive takes only its share. A copy
  // joins only when it is read with O_DIRECT and its offset has the same
  // place in a 4096-byte block as copies[0]'s (the chunks then land at the
  // same place in dest); else it is left out.
  uint64_t submit_copies(std::span<const FileSpan> copies, std::span<uint8_t> dest = {}, bool urgent = false);
  // Withdraws a span none of whose chunks has been issued yet: true, and its
  // ticket is forgotten (never returned), its destination free at once. False
  // when reading has started (it completes as usual) or it already finished.
  bool cancel(uint64_t ticket);
  // Stops a started span: its chunks not yet issued never are. It completes
  // as usual once its issued chunks land, with Completed::cut set and no
  // data; its destination is free only then. True when the span was cut (or
  // withdrawn entirely, as by cancel); false when every chunk was already
  // issued or it finished: it then completes whole.
  bool cut(uint64_t ticket);
  // Collects finished reads and issues queued chunks without blocking or
  // handing anything back (wait_any/poll still return them): call it while
  // computing so the device queue stays full.
  void progress();

  // Blocks until some span finishes and returns it; throws if that span
  // failed or if nothing is outstanding.
  Completed wait_any();
  // Returns true and fills *out if a span has finished; never blocks.
  bool poll(Completed* out);
  // Blocks until `ticket` finishes; other spans finishing meanwhile stay
  // queued for wait_any/poll.
  Completed wait(uint64_t ticket);
  // Submitted spans not yet returned by wait_any/poll/wait.
  size_t outstanding() const;
  // Read operations in flight on `device` now (at most its depth).
  int in_flight(int device) const;
  // Bytes on `device` not yet read: its spans' chunks in flight or waiting to
  // be issued (a stripe's copies: the least busy drive gets the next read).
  uint64_t queued_bytes(int device) const;
  // Bytes read from `file` so far (alignment padding included; reset_stats
  // leaves it): a stripe's per-drive figures (engine/bench_drives.h).
  uint64_t file_bytes_read(int file) const;

  ReadStats stats() const;
  void reset_stats();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
