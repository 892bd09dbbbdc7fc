// io/bandwidth_probe.h — sluice's own O_DIRECT read-bandwidth ceiling.
//
// The bench reports achieved GB/s against the ceiling of the same files on the
// same device at the same queue depth, measured in the same run: random,
// 4096-aligned spans of the model's span size (17.5 MB for K3 experts) read
// with the engine's own SpanReader and options, until a byte budget or a time
// limit is spent. Reads are O_DIRECT, so the page cache cannot serve them; if a
// file system refused O_DIRECT the result says so (`direct` false) and the
// number is not a device ceiling.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/span_reader.h"
#include "io/span_stream.h"

namespace sluice {

struct ProbeOptions {
  uint64_t read_bytes = 17547264;       // one span; rounded up to 4096
  uint64_t budget_bytes = 4ull << 30;   // stop after this many bytes ...
  double max_seconds = 5.0;             // ... or this much time, whichever first
  uint64_t seed = 1;                    // span placement
  SpanReaderOptions reader;             // queue depth, chunking, engine: as the engine reads
};

struct ProbeResult {
  double gbps = 0;        // 1e9 bytes per second
  uint64_t bytes = 0;
  uint64_t reads = 0;     // spans read
  double seconds = 0;
  bool direct = false;    // every file was read with O_DIRECT
  bool io_uring = false;
  int queue_depth = 0;
};

// Reads random spans of `files` (chosen with probability proportional to their
// usable size) and returns the bandwidth. Throws naming the files if none is
// at least read_bytes long, or on any read error.
ProbeResult measure_read_ceiling(const std::vector<std::string>& files, const ProbeOptions& options);

// Reads the spans next() hands out (false: no more), in that order, as fast as
// `reader` goes: enough buffers of max_length bytes to keep every read slot
// busy, each reused as soon as its span has landed. The data is thrown away.
// `pool`, when given, supplies the buffers (grown to need and kept for the next
// call, so a timed call faults in no fresh pages).
ProbeResult read_spans(SpanReader& reader, uint64_t max_length, const std::function<bool(FileSpan*)>& next,
                       std::vector<AlignedBuffer>* pool = nullptr);

// Writes a file of `bytes` pseudo-random bytes for probing, with O_DIRECT where
// the file system allows (so making it does not fill the page cache).
void write_probe_file(const std::string& path, uint64_t bytes);

}  // namespace sluice
