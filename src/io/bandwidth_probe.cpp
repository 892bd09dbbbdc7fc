// io/bandwidth_probe.cpp — random aligned span reads through SpanReader.
#include "io/bandwidth_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <unordered_map>

#include "base/error.h"
#include "base/splitmix.h"

namespace sluice {

ProbeResult measure_read_ceiling(const std::vector<std::string>& files, const ProbeOptions& opt) {
  const uint64_t span = align_up(std::max<uint64_t>(opt.read_bytes, 1), kIoAlign);
  SpanReader reader(files, opt.reader);

  // Files long enough for one span, weighted by how many aligned starts they offer.
  std::vector<int> usable;
  std::vector<uint64_t> starts;  // aligned start positions per usable file
  uint64_t total_starts = 0;
  for (int f = 0; f < reader.file_count(); f++) {
    if (reader.file_size(f) < span) continue;
    uint64_t n = (reader.file_size(f) - span) / kIoAlign + 1;
    usable.push_back(f);
    starts.push_back(n);
    total_starts += n;
  }
  if (usable.empty()) {
    std::string names;
    for (auto& f : files) names += (names.empty() ? "" : ", ") + f;
    fail(names.empty() ? "bandwidth probe" : names,
         "no file holds a " + std::to_string(span) + "-byte span to probe");
  }

  uint64_t rng = opt.seed;
  auto random_span = [&](int* file, uint64_t* offset) {
    uint64_t k = splitmix64(rng) % total_starts;
    size_t i = 0;
    while (k >= starts[i]) k -= starts[i++];
    *file = usable[i];
    *offset = k * kIoAlign;
  };

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  uint64_t submitted = 0;
  return read_spans(reader, span, [&](FileSpan* out) {
    if (submitted >= opt.budget_bytes || std::chrono::duration<double>(clock::now() - t0).count() >= opt.max_seconds)
      return false;
    random_span(&out->file, &out->offset);
    out->length = span;
    submitted += span;
    return true;
  });
}

ProbeResult read_spans(SpanReader& reader, uint64_t max_length, const std::function<bool(FileSpan*)>& next,
                       std::vector<AlignedBuffer>* pool) {
  // Enough spans outstanding to keep every op slot of the reader busy.
  const SpanReaderOptions& ro = reader.options();
  const uint64_t cap = SpanReader::direct_capacity(std::max<uint64_t>(max_length, 1));
  const uint64_t chunks_per_span = (cap + ro.chunk_bytes - 1) / ro.chunk_bytes;
  const size_t slots = size_t((uint64_t(ro.queue_depth) + chunks_per_span - 1) / chunks_per_span + 1);
  std::vector<AlignedBuffer> own;
  std::vector<AlignedBuffer>& buffers = pool ? *pool : own;
  std::unordered_map<uint64_t, size_t> buffer_of;  // ticket -> buffer

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const uint64_t read_before = reader.stats().bytes_read;
  ProbeResult res;
  auto submit_into = [&](size_t b) {
    FileSpan s;
    if (!next(&s)) return false;
    if (s.length > max_length) fail(reader.path(s.file), "span longer than the probe's buffers");
    buffer_of[reader.submit(s.file, s.offset, s.length, buffers[b].bytes())] = b;
    return true;
  };
  for (size_t b = 0; b < slots; b++) {
    if (b == buffers.size()) buffers.emplace_back(cap);
    if (buffers[b].size() < cap) buffers[b] = AlignedBuffer(cap);
    if (!submit_into(b)) break;
  }
  while (reader.outstanding() > 0) {
    Completed c = reader.wait_any();
    res.reads++;
    size_t b = buffer_of.at(c.ticket);
    buffer_of.erase(c.ticket);
    submit_into(b);
  }
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  res.bytes = reader.stats().bytes_read - read_before;
  res.gbps = res.seconds > 0 ? double(res.bytes) / res.seconds / 1e9 : 0;
  res.io_uring = reader.using_io_uring();
  res.queue_depth = ro.queue_depth;
  res.direct = true;
  for (int f = 0; f < reader.file_count(); f++) res.direct = res.direct && reader.file_is_direct(f);
  return res;
}

void write_probe_file(const std::string& path, uint64_t bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  bool direct = fd >= 0;
  if (fd < 0 && errno == EINVAL) fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, std::string("cannot create: ") + std::strerror(errno));
  const uint64_t block = 8ull << 20;
  AlignedBuffer buf(block);
  uint64_t rng = 0x5151;
  uint64_t done = 0;
  std::string error;
  while (done < bytes && error.empty()) {
    auto* words = reinterpret_cast<uint64_t*>(buf.data());
    for (uint64_t i = 0; i < block / 8; i++) words[i] = splitmix64(rng);
    uint64_t n = std::min(block, bytes - done);
    uint64_t len = direct ? align_up(n, kIoAlign) : n;  // direct: pad the tail, trimmed below
    uint64_t off = 0;
    while (off < len) {
      ssize_t w = pwrite(fd, buf.data() + off, len - off, off_t(done + off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error = std::string("write failed: ") + (w < 0 ? std::strerror(errno) : "no progress");
        break;
      }
      off += uint64_t(w);
    }
    done += n;
  }
  if (error.empty() && ftruncate(fd, off_t(bytes)) != 0)
    error = std::string("truncate failed: ") + std::strerror(errno);
  if (error.empty() && fdatasync(fd) != 0) error = std::string("sync failed: ") + std::strerror(errno);
  close(fd);
  if (!error.empty()) fail(path, error);
}

}  // namespace sluice
