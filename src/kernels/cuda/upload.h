// kernels/cuda/upload.h — host → device copies on their own stream, in
// chunks, so they overlap the kernels that consume them (the host tier of
// the expert stream: experts in host RAM, computed on the GPU).
//
// Two kinds of source:
// - pinned (cudaHostAlloc / cudaHostRegister): one cudaMemcpyAsync straight
//   from the source; the call returns at once and the source must stay
//   unchanged until the copy is done (sync()).
// - pageable (any other host memory, e.g. a streaming-ring slot): each chunk
//   is first memcpy'd into one of `slots` pinned staging buffers, then
//   copied; the CPU copy of chunk i+1 overlaps the DMA of chunk i. The call
//   returns when every byte has left the source (the source may be reused).
// A consumer on another stream waits with `fence(stream)` (a CUDA event: no
// host wait). Not thread-safe; one Uploader per stream of work.
#pragma once
#include <cstddef>
#include <vector>

namespace sluice::cuda {

class Uploader {
 public:
  explicit Uploader(size_t chunk_bytes = size_t(4) << 20, int slots = 3);
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // dst (device) <- src (host), n bytes, queued on this uploader's stream.
  void copy(void* dst, const void* src, size_t n, bool src_pinned);
  // `stream` (nullptr: the legacy default stream) waits for every copy queued
  // so far before its later work runs.
  void fence(void* stream);
  // The host waits for every copy queued so far.
  void sync();
  void* stream() const { return stream_; }
  size_t chunk_bytes() const { return chunk_; }
  // The pinned staging block (slots × chunk bytes, allocated by the
  // constructor), free for the caller's own use until the next copy: waits
  // for every queued copy first. (The GPU's pinned H2D ceiling is timed from it.)
  void* staging();
  size_t staging_bytes() const { return staging_bytes_; }

 private:
  size_t chunk_;
  void* staging_ = nullptr;  // slots × chunk pinned bytes
  size_t staging_bytes_ = 0;
  void* stream_ = nullptr;
  void* done_ = nullptr;  // cudaEvent_t recorded by fence()
  struct Slot {
    void* host = nullptr;   // pinned staging
    void* event = nullptr;  // its last DMA
    bool used = false;
  };
  std::vector<Slot> slots_;
  int next_ = 0;
};

}  // namespace sluice::cuda
