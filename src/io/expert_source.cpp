#include "io/expert_source.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/file_io.h"

namespace sluice {

namespace {

class PreadExperts : public ExpertSource {
 public:
  explicit PreadExperts(const Checkpoint& ck) : ck_(ck) {
    for (const std::string& path : ck.shard_paths) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) ::flock(fd, LOCK_SH | LOCK_NB);  // against `stripe --move` (span_reader.cpp's share_locked)
      if (fd < 0) {
        for (int f : fds_) ::close(f);
        fail(path, std::string("cannot open: ") + std::strerror(errno));
      }
      fds_.push_back(fd);
    }
  }
  ~PreadExperts() override {
    for (int fd : fds_) ::close(fd);
  }

  void fetch(int layer, std::span<const int> experts,
             const std::function<void(size_t, const uint8_t*)>& use) override {
    for (size_t i = 0; i < experts.size(); i++) {
      const FileSpan& s = ck_.experts.at(size_t(layer)).at(size_t(experts[i]));
      buf_.resize(s.length);
      read_exact(fds_[size_t(s.file)], buf_.data(), s.length, s.offset, ck_.shard_paths[size_t(s.file)]);
      use(i, buf_.data());
    }
  }

 private:
  const Checkpoint& ck_;
  std::vector<int> fds_;
  std::vector<uint8_t> buf_;
};

}  // namespace

std::unique_ptr<ExpertSource> make_pread_expert_source(const Checkpoint& ck) {
  return std::make_unique<PreadExperts>(ck);
}

}  // namespace sluice

// ---- io_uring + O_DIRECT + RAM cache ----------------------------------------

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <mutex>
#include <deque>
#include <set>
#include <unordered_map>

#include "io/expert_cache.h"
#include "io/span_reader.h"

namespace sluice {

namespace {

class DirectExperts : public ExpertSource {
 public:
  DirectExperts(const Checkpoint& ck, const DirectSourceOptions& opt, std::unique_ptr<ExpertSource> filler)
      : ck_(ck),
        shard_spans_(opt.shard_spans),
        shards_moved_(opt.shards_moved),
        copy_spans_(opt.copy_spans),
        device_weights_(opt.device_weights),
        on_warning_(opt.on_warning),
        filler_(std::move(filler)),
        span_(ck.config.expert_span_bytes()),
        reader_(ck.shard_paths, reader_options(opt)),
        cache_(cache_options(ck, opt)),
        hooks_(opt.host_memory) {
    const uint64_t cap = SpanReader::direct_capacity(span_);
    max_bypass_ = std::max<uint64_t>(1, opt.inflight_bytes / std::max<uint64_t>(cap, 1));
    devices_ = int(opt.device_depths.size()) + 1;
    first_moe_ = ck.config.first_k_dense_replace;
    start_populating();
  }

  // Guesses may still be in flight: they read into the cache's slots and the
  // bypass buffers, which are destroyed before reader_ (declared first), so
  // let every read land before anything is freed.
  ~DirectExperts() override {
    stop_populating_ = true;
    if (populator_.joinable()) populator_.join();
    for (size_t n = reader_.outstanding(); n > 0; n--) {
      try {
        reader_.wait_any();
      } catch (...) {  // a failed read has landed too; nobody is waiting for it
      }
    }
    if (hooks_.remove)
      for (const std::span<uint8_t>& m : announced_) hooks_.remove(m.data(), m.size());
  }

  // A failed read (or a throwing `use`) fails this fetch only: every read
  // still in flight is drained and what it was for forgotten, so the next
  // fetch starts from a consistent cache (a repaired file then reads fine).
  void fetch(int layer, std::span<const int> experts,
             const std::function<void(size_t, const uint8_t*)>& use) override {
    fetch_overlapped(layer, experts, use, {});
  }

  void fetch_overlapped(int layer, std::span<const int> experts, const std::function<void(size_t, const uint8_t*)>& use,
                        const std::function<void()>& meanwhile) override {
    fetch_batches(
        layer, experts,
        [&](std::span<const ExpertBytes> batch) {
          for (const ExpertBytes& b : batch) use(b.i, b.span);
        },
        meanwhile);
  }

  void fetch_batches(int layer, std::span<const int> experts, const BatchUse& use,
                     const std::function<void()>& meanwhile) override {
    meanwhile_ = meanwhile ? &meanwhile : nullptr;
    in_fetch_ = true;
    try {
      fetch_or_throw(layer, experts, use);
    } catch (...) {
      in_fetch_ = false;
      meanwhile_ = nullptr;
      recover();
      throw;
    }
    in_fetch_ = false;
    run_meanwhile();  // the fetch never blocked: now
    stats_.last_fetch_end_ns = steady_ns();
  }

  // Runs the fetch's meanwhile() the first time it is called.
  void run_meanwhile() {
    if (!meanwhile_) return;
    const std::function<void()>* f = meanwhile_;
    meanwhile_ = nullptr;
    (*f)();
  }

  // Calls use(batch), then frees the batch's slots and buffers (also when it throws).
  template <class Item>
  void use_batch(const BatchUse& use, const std::vector<Item>& items, std::vector<ExpertBytes>& batch) {
    batch.clear();
    for (const Item& n : items) batch.push_back({n.i, n.data});
    try {
      if (!batch.empty()) use(batch);
    } catch (...) {
      for (const Item& n : items) release(n.slot);
      throw;
    }
    for (const Item& n : items) release(n.slot);
    stats_.fetched += items.size();
  }

  void fetch_or_throw(int layer, std::span<const int> experts, const BatchUse& use) {
    if (layer == first_moe_) cache_.next_token();
    note_boundary(layer);
    // Hints for this layer that never found room are moot now (a lower
    // layer's are for the next pass: see settle_guesses).
    auto this_layer = [&](const auto& h) { return h.first == layer; };
    hints_.erase(std::remove_if(hints_.begin(), hints_.end(), this_layer), hints_.end());
    idle_hints_.erase(std::remove_if(idle_hints_.begin(), idle_hints_.end(), this_layer), idle_hints_.end());
    std::vector<Guess> mine = settle_guesses(layer, experts);
    std::vector<Need> ready;
    std::deque<size_t> to_read;
    sort_needs(layer, experts, mine, &ready, &to_read);
    if (filler_) return fill(layer, experts, ready, to_read, use);
    size_t outstanding = 0;
    for (const auto& [ticket, w] : waiting_) outstanding += w.own ? 1 : 0;
    submit_needed(layer, experts, to_read, outstanding);
    // Then the hinted reads for the next layer, behind this layer's own; those
    // that find no cache slot wait for a spare buffer (issue_hints, as reads land).
    issue_hints(to_read.empty());
    // Compute on what is already here (one batch) while the reads run.
    std::vector<ExpertBytes> batch;
    use_batch(use, ready, batch);
    use_as_reads_land(layer, experts, to_read, outstanding, use, batch);
  }

  void prefetch(int layer, std::span<const int> experts) override {
    if (filler_) return filler_->prefetch(layer, experts);
    for (int e : experts) hints_.push_back({layer, e});
  }

  void prefetch_when_idle(int layer, std::span<const int> experts) override {
    if (filler_ || devices_ < 2) return;  // one drive: never idle while reads wait
    for (int e : experts) idle_hints_.push_back({layer, e});
  }

  void withdraw(int layer, std::span<const int> keep) override {
    if (filler_) return filler_->withdraw(layer, keep);
    auto kept = [&](int e) { return std::binary_search(keep.begin(), keep.end(), e); };
    auto dropped = [&](const auto& h) { return h.first == layer && !kept(h.second); };
    hints_.erase(std::remove_if(hints_.begin(), hints_.end(), dropped), hints_.end());
    idle_hints_.erase(std::remove_if(idle_hints_.begin(), idle_hints_.end(), dropped), idle_hints_.end());
    std::vector<Guess> stay;
    for (const Guess& g : guesses_) {
      if (g.layer != layer || kept(g.expert) || !g.ticket) {
        stay.push_back(g);
        continue;
      }
      if (drop_unstarted(g)) {
        stats_.prefetch_withdrawn++;
        continue;
      }
      if (!cut_started(g)) stay.push_back(g);  // all of it already issued: let it land
    }
    guesses_ = std::move(stay);
  }

  void pump() override {
    if (filler_) return;
    if (in_fetch_) {  // inside a fetch's `use`: keep the queue full, hand nothing back
      try {
        reader_.progress();
      } catch (const Error&) {  // the fetch's own wait reports it
      }
      return;
    }
    try {
      Completed c;
      while (reader_.poll(&c)) {
        Waiting w{};
        if (!landed(c, &w)) continue;
        guess_landed(c.ticket, w.slot, c.data);  // between fetches every read is a guess
      }
      issue_hints(false);  // spare buffers only from a fetch whose own reads are all issued
    } catch (const Error&) {
      recover();  // a failed guess: the fetch that needs it reads it again and reports
    }
  }

  void long_pass(bool running) override {
    if (filler_) filler_->long_pass(running);
    long_pass_.store(running, std::memory_order_relaxed);
  }

  bool record_reads(std::vector<ExpertRead>* log) override {
    log_ = log;
    return true;
  }

  ExpertStats stats() const override {
    ExpertStats s = stats_;
    s.bytes_read = reader_.stats().bytes_read;
    if (filler_) s.network_bytes = filler_->stats().network_bytes;
    const ReadStats r = reader_.stats();
    s.read_busy_ns = r.busy_ns;
    s.read_depth_ns = r.depth_ns;
    s.file_bytes_read.resize(size_t(reader_.file_count()));
    for (int f = 0; f < reader_.file_count(); f++) s.file_bytes_read[size_t(f)] = reader_.file_bytes_read(f);
    return s;
  }

  const ExpertSource* miss_filler() const override { return filler_.get(); }

 private:
  struct Need {  // an expert of a fetch ready in a cache slot or a landed guess's buffer
    size_t i;
    int slot;  // as Waiting::slot
    const uint8_t* data;
  };
  // A prefetched read for the next fetch: in a cache slot (pinned until it
  // lands) or in spare buffer b (slot -2 - b, held until the fetch decides).
  struct Guess {
    int layer, expert, slot;
    uint64_t ticket;              // 0 once landed
    const uint8_t* data = nullptr;  // when landed
  };

  // fetch() over a miss filler: hits from the cache, misses from the filler,
  // kept in the cache when it admits them.
  void fill(int layer, std::span<const int> experts, const std::vector<Need>& ready, const std::deque<size_t>& misses,
            const BatchUse& use) {
    std::vector<ExpertBytes> batch;
    use_batch(use, ready, batch);
    std::vector<int> ids;
    for (size_t i : misses) ids.push_back(experts[i]);
    filler_->fetch(layer, ids, [&](size_t j, const uint8_t* bytes) {
      const size_t i = misses[j];
      const int slot = claim_slot(layer, experts[i]);
      if (slot >= 0) {
        uint8_t* to = cache_.slot_buffer(slot).data();
        std::memcpy(to, bytes, span_);
        cache_.set_ready(slot, to);
        bytes = to;
      }
      const ExpertBytes one{i, bytes};
      use({&one, 1});
      if (slot >= 0) cache_.unpin(slot);
      stats_.fetched++;
    });
  }

  // Issues the hinted reads: into a cache slot when the cache admits the
  // guess, else (spare_ok: the fetch's own reads are all issued) into a free
  // spare buffer. Hints that find neither wait for the next call.
  void issue_hints(bool spare_ok) {
    size_t kept = 0;
    for (size_t h = 0; h < hints_.size(); h++) {
      const auto [layer, e] = hints_[h];
      if (known(layer, e)) continue;
      int slot = claim_slot(layer, e);  // a guess never displaces pinned work
      if (slot < 0) {
        if (!spare_ok || (free_bypass_.empty() && bypass_.size() >= max_bypass_)) {
          hints_[kept++] = hints_[h];
          continue;
        }
        slot = -2 - take_bypass_buffer();
      }
      read_guess(layer, e, slot);
    }
    hints_.resize(kept);
    issue_idle_hints();
  }

  // Where a read for `slot` lands: the cache slot, or bypass buffer -2 - slot.
  std::span<uint8_t> destination(int slot) {
    return slot >= 0 ? cache_.slot_buffer(slot) : bypass_[size_t(-2 - slot)].bytes();
  }

  // Starts a guess's read of (layer, e) into `slot` (as Waiting::slot).
  void read_guess(int layer, int e, int slot) {
    FileSpan s;
    const uint64_t t = submit_expert(layer, e, destination(slot), /*urgent=*/false, &s);
    if (log_) log_->push_back({layer - 1, s});  // issued by the fetch of layer - 1
    if (slot >= 0) slot_ticket_[slot] = t;
    waiting_[t] = {0, slot, false, layer, e, s.file};
    guesses_.push_back({layer, e, slot, t, nullptr});
    stats_.prefetched++;
  }

  // Cached, or guessed already.
  bool known(int layer, int e) const {
    return cache_.find(layer, e) >= 0 ||
           std::any_of(guesses_.begin(), guesses_.end(), [&](const Guess& g) { return g.layer == layer && g.expert == e; });
  }

  // The idle-drive hints (prefetch_when_idle): on each drive with no read in
  // flight, the first one whose expert lives there, into a cache slot. A
  // needed read that comes next waits behind at most that one span.
  void issue_idle_hints() {
    if (idle_hints_.empty()) return;
    std::vector<bool> busy(static_cast<size_t>(devices_));
    for (int d = 0; d < devices_; d++) busy[size_t(d)] = reader_.in_flight(d) > 0;
    size_t kept = 0;
    for (size_t h = 0; h < idle_hints_.size(); h++) {
      const auto [layer, e] = idle_hints_[h];
      if (known(layer, e)) continue;
      const FileSpan& s = span_of(layer, e);
      const int dev = reader_.file_device(s.file);
      const int slot = busy[size_t(dev)] ? -1 : claim_slot(layer, e);
      if (slot < 0) {
        idle_hints_[kept++] = idle_hints_[h];
        continue;
      }
      read_guess(layer, e, slot);
      busy[size_t(dev)] = true;
    }
    idle_hints_.resize(kept);
  }

  // A guess's read landed: a cache slot is unpinned (it stays cached); a
  // spare buffer is kept for the fetch that decides, or freed when that fetch
  // has already passed (a wrong guess that could not be withdrawn).
  void guess_landed(uint64_t ticket, int slot, const uint8_t* data) {
    for (Guess& g : guesses_) {
      if (g.ticket != ticket) continue;
      g.ticket = 0;
      g.data = data;
      if (slot >= 0) release(slot);
      return;
    }
    release(slot);
  }

  // The expert reader's idle time since the previous fetch began, charged to `layer`.
  void note_boundary(int layer) {
    const ReadStats r = reader_.stats();
    const uint64_t now = steady_ns();
    if (layer == first_moe_) stats_.first_moe_fetch_ns = now;
    if (last_fetch_ns_) {
      const uint64_t wall = now - last_fetch_ns_, busy = r.busy_ns - last_busy_ns_;
      if (stats_.idle_before_layer_ns.size() <= size_t(layer)) stats_.idle_before_layer_ns.resize(size_t(layer) + 1);
      stats_.idle_before_layer_ns[size_t(layer)] += wall > busy ? wall - busy : 0;
    }
    last_fetch_ns_ = now;
    last_busy_ns_ = r.busy_ns;
  }

  // Drops the fetch's hold on a finished read: unpins its slot or frees its
  // bypass buffer (slot -1: nothing held).
  void release(int slot) {
    if (slot >= 0)
      cache_.unpin(slot);
    else if (slot <= -2)
      free_bypass_.push_back(-2 - slot);
  }

  // Fresh memory is zeroed by the kernel on first touch, and an O_DIRECT read
  // into untouched pages does that inside io_uring_enter, on the thread that
  // submits: the first reads into the cache's slots (a prefill's) stalled
  // compute for seconds (this VM clears well under 1 GB/s, so a bigger budget
  // made prefill slower). So the slots' memory is allocated now (address
  // space only) and a helper thread faults it in, slot by slot in the order
  // slots are handed out, with MADV_POPULATE_WRITE (it never writes data),
  // at the lowest CPU priority, and not at all during a long pass: on this VM
  // a thread clearing pages holds its core even at the lowest priority, and
  // a prompt's experts are read once (a prefill at 8.5 tok/s with a 57 MiB
  // cache fell to 5.2 with the helper running beside it). The
  // cache hands out only slots already faulted in (claim_slot); until more
  // are, a miss reads into a reused spare buffer as with a small budget.
  // Where the kernel lacks MADV_POPULATE_WRITE (before 5.14) the helper stops
  // and every slot is usable at once (faulted in by the reads, as before).
  void start_populating() {
    // The spare buffers first (every prompt chunk reads into them), then the slots.
    std::vector<std::span<uint8_t>> spare, slots;
    if (!filler_) {
      for (uint64_t b = 0; b < max_bypass_; b++) bypass_.emplace_back(SpanReader::direct_capacity(span_));
      for (size_t b = bypass_.size(); b-- > 0;) {
        free_bypass_.push_back(int(b));
        spare.push_back(bypass_[b].bytes());
      }
    }
    for (int s = 0; s < cache_.slot_count(); s++) slots.push_back(cache_.slot_buffer(s));
    auto fault_in = [](std::span<uint8_t> m) {
      for (size_t at = 0; at < m.size(); at += kPopulateStep)
        if (::madvise(m.data() + at, std::min(kPopulateStep, m.size() - at), MADV_POPULATE_WRITE) != 0) return false;
      return true;
    };
    if (uint64_t(slots.size()) * cache_.slot_bytes() <= kPopulateNowBytes) {
      // Small (tests, toy models): fault it in now, so which misses are cached never depends on timing.
      for (const std::span<uint8_t>& m : spare) fault_in(m), announce(m);
      for (const std::span<uint8_t>& m : slots) fault_in(m), announce(m);
      populated_ = int(slots.size());
      return;
    }
    populator_ = std::thread([this, spare = std::move(spare), slots = std::move(slots), fault_in] {
      ::setpriority(PRIO_PROCESS, pid_t(::syscall(SYS_gettid)), 19);  // this thread only; failure is harmless
      const int all = int(slots.size());
      for (size_t i = 0; i < spare.size() + slots.size(); i++) {
        while (long_pass_.load(std::memory_order_relaxed) && !stop_populating_)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (stop_populating_) return;
        // In 2 MiB steps (fault_in): each call holds the address space's
        // lock, and a low-priority thread must not hold it long.
        const bool is_spare = i < spare.size();
        const std::span<uint8_t> m = is_spare ? spare[i] : slots[i - spare.size()];
        if (!fault_in(m)) {
          // Every slot usable now (the reads fault them in); still announced
          // (pinning faults them in here, off the submitting thread).
          populated_.store(all, std::memory_order_relaxed);
          for (size_t k = i; k < spare.size() + slots.size() && !stop_populating_; k++)
            announce(k < spare.size() ? spare[k] : slots[k - spare.size()]);
          return;
        }
        announce(m);
        if (!is_spare) populated_.store(int(i - spare.size()) + 1, std::memory_order_relaxed);
      }
    });
  }

  // A cache slot for (layer, expert) among those faulted in (start_populating), or -1.
  int claim_slot(int layer, int expert) {
    cache_.limit_free_slots(populated_.load(std::memory_order_relaxed));
    return cache_.insert(layer, expert);
  }

  // The bytes a guess's read covers (its aligned superset).
  uint64_t aligned_bytes(const Guess& g) const {
    const FileSpan& s = span_of(g.layer, g.expert);
    return SpanReader::direct_bytes(s.offset, s.length);
  }

  // Withdraws a guess whose read has not started; its slot or buffer is free at once.
  bool drop_unstarted(const Guess& g) {
    if (!reader_.cancel(g.ticket)) return false;
    waiting_.erase(g.ticket);
    if (g.slot >= 0) {
      slot_ticket_.erase(g.slot);
      cache_.erase(g.slot);
    } else {
      free_bypass_.push_back(-2 - g.slot);
    }
    return true;
  }

  // Stops a wrong guess's read part way: its chunks not yet issued never are;
  // it lands (cut) later and landed() frees its slot or buffer then.
  bool cut_started(const Guess& g) {
    const uint64_t before = reader_.stats().bytes_not_read;
    if (!reader_.cut(g.ticket)) return false;
    stats_.prefetch_cut++;
    stats_.prefetch_wasted_bytes += aligned_bytes(g) - (reader_.stats().bytes_not_read - before);
    return true;
  }

  // The next finished read (block: waits for one; else a null ticket when
  // none is). A guess whose read failed is dropped, failing nothing: the
  // fetch of its layer reads the expert again. A failed read of our own throws.
  Completed next_read(bool block) {
    for (;;) {
      try {
        Completed c;
        if (block) return reader_.wait_any();
        if (!reader_.poll(&c)) c.ticket = 0;
        return c;
      } catch (const SpanError& e) {
        auto it = waiting_.find(e.ticket);
        if (it != waiting_.end() && it->second.own && read_again_elsewhere(e, it->second)) continue;
        if (it == waiting_.end() || it->second.own) throw;
        const int slot = it->second.slot;
        waiting_.erase(it);
        if (slot >= 0) {
          slot_ticket_.erase(slot);
          cache_.erase(slot);
        } else {
          free_bypass_.push_back(-2 - slot);
        }
        guesses_.erase(std::remove_if(guesses_.begin(), guesses_.end(),
                                      [&](const Guess& g) { return g.ticket == e.ticket; }),
                       guesses_.end());
      }
    }
  }

  // After a failed fetch: waits out every read in flight (a failed one is
  // skipped), keeps what landed in the cache, and frees the slots and buffers
  // of reads that failed, whose tickets the reader never hands back.
  void recover() {
    hints_.clear();
    idle_hints_.clear();
    for (const Guess& g : guesses_)
      if (!g.ticket && g.slot < 0) free_bypass_.push_back(-2 - g.slot);
    guesses_.clear();
    while (reader_.outstanding() > 0) {
      const size_t before = reader_.outstanding();
      Completed c;
      try {
        c = reader_.wait_any();
      } catch (const Error&) {
        if (reader_.outstanding() >= before) break;  // a stalled reader: nothing more will land
        continue;
      }
      Waiting w{};
      if (landed(c, &w)) release(w.slot);
    }
    for (const auto& [ticket, w] : waiting_) {
      if (w.slot >= 0)
        cache_.erase(w.slot);
      else
        free_bypass_.push_back(-2 - w.slot);
    }
    waiting_.clear();
    slot_ticket_.clear();
  }

  struct Waiting {
    size_t i;
    int slot;  // cache slot, or -2 - b for a read into bypass buffer b
    bool own;  // a fetch is waiting for it (else a prefetch nobody asked for yet)
    int layer = -1, expert = -1;
    int file = -1;  // the file its read came from
  };

  // Guesses made for this layer: the needed ones are used by the fetch (from
  // their cache slot or spare buffer, landed or in flight); the wrong ones are
  // withdrawn if they have not started, else left to land unused. Returns the
  // needed guesses in spare buffers; the guesses for later layers stay.
  std::vector<Guess> settle_guesses(int layer, std::span<const int> experts) {
    std::vector<Guess> mine, later;
    for (const Guess& g : guesses_) {
      // Hinted for a later layer, or (a lower one) for the next pass, made
      // during this pass's last MoE layer: that layer's own fetch decides.
      if (g.layer != layer) {
        later.push_back(g);
        continue;
      }
      if (g.ticket) stats_.prefetch_pending++;
      const bool needed = g.layer == layer && std::find(experts.begin(), experts.end(), g.expert) != experts.end();
      if (needed && g.slot >= 0 && !g.ticket && cache_.find(g.layer, g.expert) != g.slot) {
        stats_.prefetch_wasted++;  // landed, then evicted before its layer came
        stats_.prefetch_wasted_bytes += aligned_bytes(g);
        continue;
      }
      if (needed) {
        stats_.prefetch_used++;
        if (g.slot < 0) mine.push_back(g);  // a cache-slot guess is found by sort_needs's lookup
        continue;
      }
      if (g.ticket && drop_unstarted(g)) {
        stats_.prefetch_cancelled++;
        continue;
      }
      if (g.ticket && cut_started(g)) continue;  // never delays a needed read
      stats_.prefetch_wasted++;
      stats_.prefetch_wasted_bytes += aligned_bytes(g);
      if (!g.ticket && g.slot < 0) free_bypass_.push_back(-2 - g.slot);  // landed in a spare buffer
    }
    guesses_ = std::move(later);
    return mine;
  }

  // A guess's read in flight becomes the fetch's own, for its need i.
  void own_now(uint64_t ticket, size_t i, int slot, int layer, int e) {
    auto it = waiting_.find(ticket);
    const int file = it != waiting_.end() ? it->second.file : -1;
    waiting_[ticket] = {i, slot, /*own=*/true, layer, e, file};
  }

  // A fetch's needs: either ready (cache or a landed guess) into *ready, in
  // flight (a prefetch: waited for as the fetch's own read), or to be read
  // (their indexes into experts, in *to_read).
  void sort_needs(int layer, std::span<const int> experts, std::vector<Guess>& mine, std::vector<Need>* ready,
                  std::deque<size_t>* to_read) {
    for (size_t i = 0; i < experts.size(); i++) {
      const int e = experts[i];
      auto g = std::find_if(mine.begin(), mine.end(), [&](const Guess& x) { return x.expert == e; });
      if (g != mine.end()) {
        if (g->ticket)
          own_now(g->ticket, i, g->slot, layer, e);
        else
          ready->push_back({i, g->slot, g->data});
        mine.erase(g);
        continue;
      }
      int slot = cache_.lookup(layer, e);
      if (slot >= 0) {
        if (cache_.ready(slot)) {
          cache_.pin(slot);
          ready->push_back({i, slot, cache_.data(slot)});
          stats_.cache_hits++;
          stats_.bytes_hit += span_;
        } else {
          // A prefetch is reading it; its pin holds the slot until the read lands.
          own_now(slot_ticket_.at(slot), i, slot, layer, e);
        }
        continue;
      }
      to_read->push_back(i);
    }
  }

  // Submits the fetch's reads in to_read, as buffers allow; `outstanding`
  // counts its own reads in flight.
  void submit_needed(int layer, std::span<const int> experts, std::deque<size_t>& to_read, size_t& outstanding) {
    while (!to_read.empty()) {
      const size_t i = to_read.front();
      int slot = claim_slot(layer, experts[i]);  // pinned when >= 0
      // No buffer free: wait for one of ours to land (never for a guess's:
      // with nothing of ours in flight, take one more buffer instead).
      if (slot < 0 && free_bypass_.empty() && bypass_.size() >= max_bypass_ && outstanding > 0) break;
      to_read.pop_front();
      uint64_t t;
      FileSpan s;
      // Needed now: ahead of every guess not yet started.
      if (slot >= 0) {
        t = submit_expert(layer, experts[i], cache_.slot_buffer(slot), /*urgent=*/true, &s);
        slot_ticket_[slot] = t;
      } else {
        const int b = take_bypass_buffer();
        t = submit_expert(layer, experts[i], bypass_[size_t(b)].bytes(), /*urgent=*/true, &s);
        slot = -2 - b;  // a bypass buffer, not a cache slot
      }
      if (log_) log_->push_back({layer, s});
      waiting_[t] = {i, slot, true, layer, experts[i], s.file};
      outstanding++;
    }
  }

  // The fetch's reads as they land: uses each one that lands in a batch with
  // every other landed by then, and keeps the queue full behind them.
  void use_as_reads_land(int layer, std::span<const int> experts, std::deque<size_t>& to_read, size_t outstanding,
                         const BatchUse& use, std::vector<ExpertBytes>& batch) {
    struct Landed {
      size_t i;
      int slot;
      const uint8_t* data;
    };
    std::vector<Completed> done;  // keeps each read's buffer alive through the batch
    std::vector<Landed> arrived;
    while (outstanding > 0) {
      run_meanwhile();  // before the first block on a read (its pumps keep the queue full)
      done.clear();
      arrived.clear();
      const auto w0 = std::chrono::steady_clock::now();
      done.push_back(next_read(true));
      stats_.wait_ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - w0)
                                     .count());
      try {
        for (size_t k = 0;; k++) {
          if (k == done.size()) {
            Completed more = next_read(false);
            if (!more.ticket) break;
            done.push_back(std::move(more));
          }
          const Completed& c = done[k];
          Waiting w{};
          if (!landed(c, &w)) continue;  // cannot happen: every ticket is recorded
          if (c.cut && w.own) {  // a guess withdrawn part-read that this fetch needs after all: read it again
            outstanding--;
            to_read.push_back(w.i);
            continue;
          }
          if (!w.own) {
            guess_landed(c.ticket, w.slot, c.data);
            continue;
          }
          outstanding--;
          arrived.push_back({w.i, w.slot, c.data});
        }
      } catch (...) {  // a failed read: what landed before it is let go, the fetch fails
        for (const Landed& a : arrived) release(a.slot);
        throw;
      }
      submit_needed(layer, experts, to_read, outstanding);  // the withdrawn guesses' reads again, first
      use_batch(use, arrived, batch);
      submit_needed(layer, experts, to_read, outstanding);
      issue_hints(to_read.empty());
    }
  }

  // Where an expert is read from now: its span (a stripe's drive file, or a
  // shard); with copies, of those whose file has not failed a read, the one
  // whose drive would finish it first, (bytes queued + its bytes) / the
  // drive's weight (the first on a tie: a slow drive's queue counts for
  // more); its span in the shards once every drive copy failed.
  FileSpan span_of(int layer, int expert) const {
    const FileSpan& first = ck_.experts[size_t(layer)][size_t(expert)];
    const bool copies = !copy_spans_.empty() && !copy_spans_[size_t(layer)][size_t(expert)].empty();
    if (!copies) {
      if (failed_files_.empty() || !failed_files_.count(first.file) || shards_moved_) return first;
      return shard_spans_[size_t(layer)][size_t(expert)];
    }
    const FileSpan* best = nullptr;
    double soonest = 0;
    auto consider = [&](const FileSpan& s) {
      if (failed_files_.count(s.file)) return;
      const int dev = reader_.file_device(s.file);
      const double w = dev >= 1 && size_t(dev) <= device_weights_.size() ? device_weights_[size_t(dev - 1)] : 1.0;
      const double done = double(reader_.queued_bytes(dev) + s.length) / (w > 0 ? w : 1.0);
      if (!best || done < soonest) best = &s, soonest = done;
    };
    consider(first);
    for (const FileSpan& s : copy_spans_[size_t(layer)][size_t(expert)]) consider(s);
    if (best) return *best;
    return shards_moved_ ? first : shard_spans_[size_t(layer)][size_t(expert)];  // moved: it fails again, by name
  }

  // Starts the read of (layer, e) into dest from span_of's choice (*from);
  // with copies, the other copies not failed join it, so each chunk comes
  // from whichever copy's drive frees first (SpanReader::submit_copies): a
  // layer's reads then split evenly over the drives however many experts
  // each drive was picked for.
  uint64_t submit_expert(int layer, int e, std::span<uint8_t> dest, bool urgent, FileSpan* from) {
    const FileSpan first = span_of(layer, e);
    *from = first;
    if (copy_spans_.empty() || copy_spans_[size_t(layer)][size_t(e)].empty())
      return reader_.submit(first.file, first.offset, first.length, dest, urgent);
    std::vector<FileSpan> all{first};
    auto add = [&](const FileSpan& c) {
      if (c.file != first.file && !failed_files_.count(c.file)) all.push_back(c);
    };
    add(ck_.experts[size_t(layer)][size_t(e)]);
    for (const FileSpan& c : copy_spans_[size_t(layer)][size_t(e)]) add(c);
    return reader_.submit_copies(all, dest, urgent);
  }

  // A drive copy of (layer, expert) other than `file` whose file has not failed.
  bool another_copy(int layer, int expert, int file) const {
    auto usable = [&](const FileSpan& c) { return c.file != file && !failed_files_.count(c.file); };
    if (usable(ck_.experts[size_t(layer)][size_t(expert)])) return true;
    if (copy_spans_.empty()) return false;
    for (const FileSpan& c : copy_spans_[size_t(layer)][size_t(expert)])
      if (usable(c)) return true;
    return false;
  }

  // A read of our own failed (SpanError e, for w): when it came from a drive
  // file of a stripe whose expert is still in the shards, says so once per
  // file, reads every expert of that file from its other copies (or the
  // shards) from now on, and reads this one again from there (same slot or
  // buffer, same waiter). The failure itself stays on record
  // (base/read_fault.h: /health reports it).
  bool read_again_elsewhere(const SpanError& e, Waiting w) {
    if (w.layer < 0 || shard_spans_.empty()) return false;
    const int from = e.file >= 0   ? e.file
                     : w.file >= 0 ? w.file
                                   : ck_.experts[size_t(w.layer)][size_t(w.expert)].file;
    const FileSpan& shard = shard_spans_[size_t(w.layer)][size_t(w.expert)];
    if (shard.length == 0 || from == shard.file) return false;
    if (shards_moved_ && !another_copy(w.layer, w.expert, from)) return false;  // the shards hold holes there
    const bool first = failed_files_.insert(from).second;  // reads already in flight fail too: say it once
    FileSpan to;
    const uint64_t t = submit_expert(w.layer, w.expert, destination(w.slot), /*urgent=*/true, &to);  // not `from` now
    if (first && on_warning_)
      on_warning_(std::string(e.what()) + "; reading the experts of " + ck_.shard_paths[size_t(from)] + " from " +
                  (copy_spans_.empty() ? "the shards" : "their other copies (or the shards)") + " from now on");
    w.file = to.file;
    if (w.slot >= 0) slot_ticket_[w.slot] = t;
    waiting_.erase(e.ticket);
    waiting_[t] = w;
    stats_.read_again++;
    return true;
  }

  // A read has landed: forgets its ticket into *w and, when it filled a cache
  // slot, marks the slot ready. False for a ticket not recorded here.
  bool landed(const Completed& c, Waiting* w) {
    auto it = waiting_.find(c.ticket);
    if (it == waiting_.end()) return false;
    *w = it->second;
    waiting_.erase(it);
    if (c.cut) {  // a wrong guess stopped part way: its slot or buffer holds nothing
      if (w->slot >= 0) {
        slot_ticket_.erase(w->slot);
        cache_.erase(w->slot);
      } else {
        free_bypass_.push_back(-2 - w->slot);
      }
      w->slot = -1;
      return true;
    }
    if (w->slot >= 0) {
      cache_.set_ready(w->slot, c.data);
      slot_ticket_.erase(w->slot);
    }
    return true;
  }

  // A buffer for a read the cache does not keep: reused, so no read faults in
  // and zeroes fresh pages. max_bypass_ of them are allocated (and faulted in
  // by the populator) when the source opens; one more only when a fetch has
  // none of its own reads in flight.
  int take_bypass_buffer() {
    if (free_bypass_.empty()) {
      bypass_.emplace_back(SpanReader::direct_capacity(span_));
      announce(bypass_.back().bytes());
      return int(bypass_.size()) - 1;
    }
    const int b = free_bypass_.back();
    free_bypass_.pop_back();
    return b;
  }

  static SpanReaderOptions reader_options(const DirectSourceOptions& o) {
    SpanReaderOptions r;
    r.queue_depth = std::max(1, o.queue_depth);
    r.device_depths = o.device_depths;
    r.file_devices = o.file_devices;
    r.device_weights.push_back(1.0);  // device 0: the shards
    r.device_weights.insert(r.device_weights.end(), o.device_weights.begin(), o.device_weights.end());
    return r;
  }
  static ExpertCacheOptions cache_options(const Checkpoint& ck, const DirectSourceOptions& o) {
    const ModelConfig& c = ck.config;
    ExpertCacheOptions co;
    co.slot_bytes = SpanReader::direct_capacity(c.expert_span_bytes());
    co.budget_bytes = o.cache_bytes;
    co.layers = c.num_hidden_layers;
    co.experts_per_layer = std::max(c.num_experts, 1);
    co.lookups_per_token = (c.num_hidden_layers - c.first_k_dense_replace) * c.num_experts_per_token;
    return co;
  }

  // Tells hooks_.add of read memory once it is faulted in (any thread).
  void announce(std::span<uint8_t> m) {
    if (!hooks_.add || m.empty()) return;
    std::lock_guard<std::mutex> lock(announced_mu_);
    hooks_.add(m.data(), m.size());
    announced_.push_back(m);
  }

  const Checkpoint& ck_;
  std::vector<std::vector<FileSpan>> shard_spans_;  // DirectSourceOptions::shard_spans
  bool shards_moved_ = false;                       // DirectSourceOptions::shards_moved
  std::vector<std::vector<std::vector<FileSpan>>> copy_spans_;  // DirectSourceOptions::copy_spans
  std::vector<double> device_weights_;                          // DirectSourceOptions::device_weights
  std::set<int> failed_files_;                      // drive files that failed a read
  std::function<void(const std::string&)> on_warning_;
  std::unique_ptr<ExpertSource> filler_;  // a stream install's HTTP source, or null
  uint64_t span_;
  SpanReader reader_;
  ExpertCache cache_;
  HostMemoryHooks hooks_;
  std::mutex announced_mu_;
  std::vector<std::span<uint8_t>> announced_;  // given to hooks_.add, removed when the source closes
  std::unordered_map<uint64_t, Waiting> waiting_;  // ticket -> what it is for
  std::unordered_map<int, uint64_t> slot_ticket_;  // slot -> its read in flight
  std::vector<AlignedBuffer> bypass_;
  std::vector<int> free_bypass_;
  std::vector<ExpertRead>* log_ = nullptr;
  uint64_t max_bypass_ = 1;
  int first_moe_ = 1;
  std::vector<std::pair<int, int>> hints_;  // (layer, expert) to read after the next fetch's own reads
  std::vector<std::pair<int, int>> idle_hints_;  // (layer, expert) to read when its drive is idle
  int devices_ = 1;                              // the reader's devices (a stripe's drives + the shards')
  std::vector<Guess> guesses_;              // issued hints, until the fetch of their layer
  uint64_t last_fetch_ns_ = 0, last_busy_ns_ = 0;
  bool in_fetch_ = false;  // pump() then leaves completions to the fetch's own loop
  const std::function<void()>* meanwhile_ = nullptr;  // the fetch's meanwhile(), until it has run
  ExpertStats stats_;
  static constexpr size_t kPopulateStep = 2u << 20;
  static constexpr uint64_t kPopulateNowBytes = 256ull << 20;
  std::atomic<bool> stop_populating_{false};
  std::atomic<int> populated_{0};  // slots [0, populated_) are faulted in
  std::atomic<bool> long_pass_{false};  // the populator waits while it is set
  std::thread populator_;  // faults the slots' memory in (start_populating)
};

}  // namespace

std::unique_ptr<ExpertSource> make_direct_expert_source(const Checkpoint& ck, const DirectSourceOptions& opt,
                                                        std::unique_ptr<ExpertSource> miss_filler) {
  return std::make_unique<DirectExperts>(ck, opt, std::move(miss_filler));
}

}  // namespace sluice
