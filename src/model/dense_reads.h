// model/dense_reads.h — a model's dense weights (K3's spine: k3/spine.h) as
// bench and the statistics see them: resident or streamed, the bytes read,
// and a pass of reads alone (bench replays one without compute).
#pragma once
#include <cstdint>
#include <functional>

#include "io/span_stream.h"
#include "pack/pack.h"

namespace sluice {

class DenseReads {
 public:
  virtual ~DenseReads() = default;
  // Every matrix held in RAM (else some stream through a ring every pass).
  virtual bool all_resident() const = 0;
  // The pack the weights are read from; nullptr: the checkpoint's bf16 shards.
  virtual const Pack* pack() const = 0;
  // Bytes read from disk so far.
  virtual uint64_t bytes_read() const = 0;
  // Bytes one pass streams (the head's too when with_head).
  virtual uint64_t streamed_bytes_per_pass(bool with_head) const = 0;
  virtual SpanStreamStats stream_stats() const = 0;
  // One pass of reads without compute, calling at_unit(unit) as each unit is ready.
  virtual void read_pass(bool with_head, const std::function<void(int unit)>& at_unit = {}) = 0;
};

}  // namespace sluice
