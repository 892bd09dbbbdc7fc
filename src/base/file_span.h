// base/file_span.h — a contiguous byte range of one of several files: what
// the checkpoint indexes (an expert, a tensor), what SpanReader and SpanStream
// read, what a bench replays. `file` indexes the reader's (the checkpoint's
// shard) list.
#pragma once
#include <cstdint>

namespace sluice {

struct FileSpan {
  int file = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
};

}  // namespace sluice
