// io/aligned_buffer.h — owned, page-aligned memory for O_DIRECT reads.
//
// O_DIRECT wants the buffer address, file offset and length aligned to the
// device's logical block; sluice uses 4096 everywhere (it covers 512- and
// 4096-byte devices). An AlignedBuffer owns one such allocation, is move-only
// and frees it on destruction. The allocation is rounded up to a whole number
// of alignment units (4096 for those of 2 MiB and more) so a full-block read
// into it never runs past the end.
//
// Buffers of 2 MiB and more (the resident spine, expert cache slots, read
// buffers, the ring) are their own anonymous mapping, start on a 2 MiB
// boundary and ask for transparent huge pages over their whole 2 MiB pages
// (madvise; a no-op where THP is off). The kernels read these bytes once per
// pass: on the development VM the first touch of each 4 KiB page of a 176 MB
// matrix cost ~4 µs (250 ms per bf16 prefill matmul against 64 ms on the
// next pass over the same bytes), and with huge pages every pass ran at the
// second pass's speed (docs/kernels.md). Huge pages lie inside
// [data, data + size), so the memory a buffer can hold never grows.
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <utility>

namespace sluice {

inline constexpr size_t kIoAlign = 4096;
inline constexpr size_t kHugePage = size_t(2) << 20;

constexpr uint64_t align_down(uint64_t x, uint64_t a) { return x / a * a; }
constexpr uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, size_t alignment = kIoAlign) : size_(size) {
    if (size == 0) return;
    if (huge()) {
      data_ = map_huge(size, std::max(alignment, kHugePage));
      return;
    }
    void* p = nullptr;
    if (posix_memalign(&p, alignment, align_up(size, alignment)) != 0) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { release(); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<uint8_t> bytes() { return {data_, size_}; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  // Big buffers are their own mapping (not malloc's heap): freeing one gives
  // its memory back at once, and no small allocation ever lands in a huge page.
  bool huge() const { return size_ >= kHugePage; }

  // At an `alignment` boundary (a multiple of 2 MiB: map that much more,
  // unmap the ends), the mapping exactly the 4 KiB pages `size` needs: a
  // last, partial 2 MiB unit lies only partly inside it and so never becomes
  // a huge page (not with THP "always" either), and huge pages are asked for
  // only over the units `size` fills — the buffer never holds more memory
  // than its 4 KiB pages would.
  static uint8_t* map_huge(size_t size, size_t alignment) {
    const size_t bytes = align_up(size, kIoAlign), span = bytes + alignment;
    void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(m), aligned = align_up(start, alignment);
    if (aligned > start) ::munmap(m, aligned - start);
    if (const uintptr_t end = aligned + bytes; end < start + span) ::munmap(reinterpret_cast<void*>(end), start + span - end);
    uint8_t* p = reinterpret_cast<uint8_t*>(aligned);
    ::madvise(p, align_down(size, kHugePage), MADV_HUGEPAGE);  // advice: a failure changes nothing
    return p;
  }

  void release() {
    if (!data_) return;
    if (huge())
      ::munmap(data_, align_up(size_, kIoAlign));
    else
      std::free(data_);
    data_ = nullptr;
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sluice
