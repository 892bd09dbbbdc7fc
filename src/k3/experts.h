// k3/experts.h — where the MoE gets routed experts' bytes from.
//
// An expert is one contiguous span of the shard (checkpoint/checkpoint.h); the
// MoE asks for the spans of the experts one layer needs and computes on each as
// it becomes available. Sources differ in where bytes come from (a plain pread,
// io_uring with O_DIRECT, a RAM cache, an HTTP span cache) but never in what the
// bytes are, so the model's output never depends on the source.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "checkpoint/checkpoint.h"

namespace sluice {

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Calls use(i, span) once for each i < experts.size(), with the bytes of
  // expert experts[i] of `layer`, in any order; the span is valid during the call.
  virtual void fetch(int layer, std::span<const int> experts,
                     const std::function<void(size_t i, const uint8_t* span)>& use) = 0;
};

// Reads each span with pread, every time (no cache): the simplest correct source.
std::unique_ptr<ExpertSource> make_pread_expert_source(const Checkpoint& ck);

}  // namespace sluice
