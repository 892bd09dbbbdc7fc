// io/span_stream.cpp — the loader thread and the ring behind SpanStream.
//
// Locking: one mutex guards the ring, the entries and both positions. The
// loader submits reads while holding it (submit only queues work) and drops it
// while it waits for a completion; the consumer drops it while it waits for an
// entry to land. Entries are created in read order and freed in the same order,
// so the ring is a FIFO arc: used_ bytes from head_ on, wrapping at the end.
#include "io/span_stream.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "base/error.h"

namespace sluice {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

uint64_t SpanStream::region_bytes(const StreamItem& item) {
  uint64_t n = 0;
  for (const FileSpan& s : item.spans) n += SpanReader::direct_capacity(s.length);
  return n;
}

uint64_t SpanStream::min_ring_bytes(const std::vector<StreamItem>& items) {
  uint64_t item = 0, span = 0;
  for (const StreamItem& it : items) {
    item = std::max(item, region_bytes(it));
    for (const FileSpan& s : it.spans) span = std::max(span, SpanReader::direct_capacity(s.length));
  }
  return 2 * item + span;
}

SpanStream::SpanStream(const std::vector<std::string>& paths, std::vector<StreamItem> items, size_t required,
                       uint64_t ring_bytes, SpanReaderOptions io)
    : paths_(paths), items_(std::move(items)), required_(std::min(required, items_.size())), io_(io) {
  if (items_.empty()) fail("span stream", "nothing to stream");
  const uint64_t need = min_ring_bytes(items_);
  if (ring_bytes < need)
    fail("span stream", "a ring of " + std::to_string(ring_bytes) + " bytes cannot hold two items (needs " +
                            std::to_string(need) + ")");
  ring_ = AlignedBuffer(align_down(ring_bytes, kIoAlign));
  reader_ = std::make_unique<SpanReader>(paths_, io_);  // opens the files here: errors reach the caller
  thread_ = std::thread([this] { loader(); });
}

SpanStream::~SpanStream() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (leak_ring_) {
    // A stalled device may still write into the ring: keep it alive forever.
    reader_.release();  // its destructor would wait out the stall again; it is dead anyway
    new AlignedBuffer(std::move(ring_));
  }
}

bool SpanStream::next_item(uint64_t* pass, size_t* item) {
  if (load_pass_ < consumer_pass_) {  // the consumer moved on: skip what is left of older passes
    load_pass_ = consumer_pass_;
    load_item_ = 0;
  }
  if (load_pass_ == consumer_pass_ && load_item_ < consumer_want_) load_item_ = consumer_want_;
  for (;;) {
    size_t n = items_.size();
    if (load_item_ >= required_) {
      auto w = tail_wanted_.find(load_pass_);
      if (w == tail_wanted_.end()) return false;  // this pass has not begun: its tail may not be wanted
      n = w->second ? items_.size() : required_;
    }
    if (load_item_ < n) {
      *pass = load_pass_;
      *item = load_item_;
      return true;
    }
    load_pass_++;
    load_item_ = 0;
  }
}

bool SpanStream::place(const StreamItem& item, std::vector<uint64_t>* offsets, uint64_t* arc) {
  const uint64_t cap = ring_.size();
  uint64_t head = used_ == 0 ? 0 : head_, used = used_;
  offsets->clear();
  *arc = 0;
  for (const FileSpan& s : item.spans) {
    const uint64_t size = SpanReader::direct_capacity(s.length);
    uint64_t at, grow;
    if (head + used <= cap) {  // in use: [head, head+used); free: the end, then [0, head)
      const uint64_t end = head + used;
      if (cap - end >= size) at = end, grow = size;
      else if (head >= size) at = 0, grow = (cap - end) + size;  // skip the end, wrap
      else return false;
    } else {  // wrapped: in use to the end and [0, head+used-cap); free: up to head
      const uint64_t end = head + used - cap;
      if (head - end < size) return false;
      at = end, grow = size;
    }
    offsets->push_back(at);
    used += grow;
    *arc += grow;
  }
  return true;
}

void SpanStream::free_released() {
  bool freed = false;
  while (!entries_.empty() && entries_.front().released && entries_.front().reads_left == 0) {
    const Entry& e = entries_.front();
    if (!e.taken) stats_.items_dropped++;
    used_ -= e.arc;
    head_ = used_ == 0 ? 0 : (head_ + e.arc) % ring_.size();
    entries_.pop_front();
    freed = true;
  }
  if (freed) cv_.notify_all();
}

void SpanStream::release_held() {
  if (!held_) return;
  held_->released = true;
  held_ = nullptr;
  free_released();
}

void SpanStream::begin_pass(bool with_tail) {
  std::lock_guard<std::mutex> lk(mu_);
  release_held();
  consumer_pass_++;
  consumer_want_ = 0;
  tail_wanted_.erase(tail_wanted_.begin(), tail_wanted_.lower_bound(consumer_pass_));
  tail_wanted_[consumer_pass_] = with_tail;
  for (Entry& e : entries_)
    if (e.pass < consumer_pass_) e.released = true;
  free_released();
  cv_.notify_all();
}

const uint8_t* const* SpanStream::acquire(size_t i) {
  std::unique_lock<std::mutex> lk(mu_);
  release_held();
  if (consumer_pass_ == 0) fail("span stream", "acquire before begin_pass");
  const bool tail = tail_wanted_.at(consumer_pass_);
  if (i >= items_.size() || (i >= required_ && !tail) || i < consumer_want_)
    fail("span stream", "item " + std::to_string(i) + " taken out of order or not in this pass");
  consumer_want_ = i;
  // Everything older than (pass, i) is passed over.
  for (Entry& e : entries_)
    if (e.pass < consumer_pass_ || (e.pass == consumer_pass_ && e.item < i)) e.released = true;
  free_released();
  cv_.notify_all();
  const auto t0 = std::chrono::steady_clock::now();
  Entry* found = nullptr;
  for (;;) {
    if (!error_.empty()) throw Error(error_);
    for (Entry& e : entries_)
      if (e.pass == consumer_pass_ && e.item == i && !e.released) found = &e;
    if (found && found->reads_left == 0) break;
    found = nullptr;
    cv_.wait(lk);
  }
  stats_.consumer_wait_s += seconds_since(t0);
  consumer_want_ = i + 1;
  found->taken = true;
  if (!found->error.empty()) {  // this pass fails; the next one reads the item again
    found->released = true;
    const std::string error = found->error;
    free_released();
    throw Error(error);
  }
  held_ = found;
  return found->data.data();
}

void SpanStream::release() {
  std::lock_guard<std::mutex> lk(mu_);
  release_held();
}

SpanStreamStats SpanStream::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void SpanStream::loader() {
  SpanReader& reader = *reader_;
  try {
    loader_loop(reader);
  } catch (const std::exception& e) {  // bookkeeping failure: never leave the consumer waiting
    std::lock_guard<std::mutex> lk(mu_);
    if (error_.empty()) error_ = e.what();
    cv_.notify_all();
  }
  // Nothing may be in flight into the ring when this thread ends.
  while (reader.outstanding() > 0) {
    const size_t before = reader.outstanding();
    try {
      reader.wait_any();
    } catch (const std::exception&) {
      if (reader.outstanding() >= before) {  // stalled: the reader gave up on its reads
        std::lock_guard<std::mutex> lk(mu_);
        leak_ring_ = true;
        break;
      }
    }
  }
}

void SpanStream::loader_loop(SpanReader& reader) {
  struct Target {
    Entry* entry;
    size_t span;     // index in the item
    uint64_t bytes;  // aligned bytes the read moves
    int file;
  };
  std::unordered_map<uint64_t, Target> tickets;
  std::vector<uint64_t> offsets;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    // Submit every item that has room, in order.
    uint64_t pass;
    size_t it;
    uint64_t arc;
    while (error_.empty() && next_item(&pass, &it) && place(items_[it], &offsets, &arc)) {
      const StreamItem& item = items_[it];
      if (used_ == 0) head_ = 0;
      entries_.push_back(Entry{pass, it, arc, int(item.spans.size()), false, false, {}, {}});
      Entry& e = entries_.back();
      used_ += arc;
      e.data.resize(item.spans.size());
      for (size_t j = 0; j < item.spans.size(); j++) {
        const FileSpan& s = item.spans[j];
        std::span<uint8_t> dest(ring_.data() + offsets[j], SpanReader::direct_capacity(s.length));
        tickets[reader.submit(s.file, s.offset, s.length, dest)] = {&e, j, SpanReader::direct_bytes(s.offset, s.length), s.file};
      }
      if (item.spans.empty()) cv_.notify_all();
      load_item_++;
    }
    if (reader.outstanding() == 0 || !error_.empty()) {
      if (!error_.empty() && reader.outstanding() > 0) {
        lk.unlock();
        return;  // loader() drains what is in flight
      }
      const auto t0 = std::chrono::steady_clock::now();
      cv_.wait(lk);  // for room, a new pass, or stop
      stats_.loader_idle_s += seconds_since(t0);
      continue;
    }
    lk.unlock();
    Completed c;
    std::string err, failed;  // the reader is broken / one span failed
    try {
      c = reader.wait_any();
    } catch (const SpanError& x) {
      failed = x.what();
      c.ticket = x.ticket;
    } catch (const std::exception& x) {
      err = x.what();
    }
    lk.lock();
    if (!err.empty()) {
      if (error_.empty()) error_ = err;
      cv_.notify_all();
      continue;
    }
    auto t = tickets.find(c.ticket);
    if (t == tickets.end()) continue;
    Entry* e = t->second.entry;
    if (failed.empty()) {
      e->data[t->second.span] = c.data;
      stats_.bytes_read += t->second.bytes;
      if (stats_.file_bytes.size() <= size_t(t->second.file)) stats_.file_bytes.resize(size_t(t->second.file) + 1, 0);
      stats_.file_bytes[size_t(t->second.file)] += t->second.bytes;
    } else if (e->error.empty()) {
      e->error = failed;
      stats_.read_errors++;
    }
    e->reads_left--;
    tickets.erase(t);
    if (e->reads_left == 0) {
      if (e->error.empty()) stats_.items_read++;
      cv_.notify_all();
      free_released();  // a skipped entry can go as soon as it landed
    }
  }
}

}  // namespace sluice
