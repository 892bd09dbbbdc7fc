// kernels/cuda/upload.cu — chunked host → device copies (upload.h).
#include "kernels/cuda/upload.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/common.cuh"

namespace sluice::cuda {
using namespace detail;

Uploader::Uploader(size_t chunk_bytes, int slots) : chunk_(std::max<size_t>(chunk_bytes, 4096)) {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  done_ = e;
  // The staging, one pinned block, allocated and touched now: it is host
  // memory the process holds from here on (the memory plan counts it in the
  // process's baseline when it is made after this).
  slots_.resize(size_t(std::max(slots, 2)));
  staging_bytes_ = chunk_ * slots_.size();
  check(cudaHostAlloc(&staging_, staging_bytes_, cudaHostAllocDefault), "cudaHostAlloc (staging)");
  std::memset(staging_, 0, staging_bytes_);
  for (size_t i = 0; i < slots_.size(); i++) {
    slots_[i].host = static_cast<char*>(staging_) + i * chunk_;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    slots_[i].event = e;
  }
}

Uploader::~Uploader() {
  cudaStreamSynchronize(as_stream(stream_));
  for (Slot& s : slots_)
    if (s.event) cudaEventDestroy(static_cast<cudaEvent_t>(s.event));
  if (staging_) cudaFreeHost(staging_);
  cudaEventDestroy(static_cast<cudaEvent_t>(done_));
  cudaStreamDestroy(as_stream(stream_));
}

void* Uploader::staging() {
  sync();  // no DMA still reads it
  for (Slot& s : slots_) s.used = false;
  return staging_;
}

void Uploader::copy(void* dst, const void* src, size_t n, bool src_pinned) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const cudaStream_t st = as_stream(stream_);
  if (src_pinned) {  // one DMA: issuing a call per chunk only delays the caller (a split's CPU rows wait for it)
    if (n) check(cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, st), "h2d");
    return;
  }
  for (size_t off = 0; off < n; off += chunk_) {
    const size_t len = std::min(chunk_, n - off);
    Slot& slot = slots_[size_t(next_)];
    next_ = (next_ + 1) % int(slots_.size());
    // The slot's previous DMA must have read it before it is overwritten.
    if (slot.used) check(cudaEventSynchronize(static_cast<cudaEvent_t>(slot.event)), "staging wait");
    std::memcpy(slot.host, s + off, len);
    check(cudaMemcpyAsync(d + off, slot.host, len, cudaMemcpyHostToDevice, st), "h2d");
    check(cudaEventRecord(static_cast<cudaEvent_t>(slot.event), st), "cudaEventRecord");
    slot.used = true;
  }
}

void Uploader::fence(void* stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(done_), as_stream(stream_)), "cudaEventRecord");
  check(cudaStreamWaitEvent(as_stream(stream), static_cast<cudaEvent_t>(done_), 0), "cudaStreamWaitEvent");
}

void Uploader::sync() { check(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize"); }

}  // namespace sluice::cuda
