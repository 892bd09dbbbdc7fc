// io/aligned_buffer.h — owned, page-aligned memory for O_DIRECT reads.
//
// O_DIRECT wants the buffer address, file offset and length aligned to the
// device's logical block; sluice uses 4096 everywhere (it covers 512- and
// 4096-byte devices). An AlignedBuffer owns one such allocation, is move-only
// and frees it on destruction. The allocation is rounded up to a whole number
// of alignment units so a full-block read into it never runs past the end.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <utility>

namespace sluice {

inline constexpr size_t kIoAlign = 4096;

constexpr uint64_t align_down(uint64_t x, uint64_t a) { return x / a * a; }
constexpr uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, size_t alignment = kIoAlign) : size_(size) {
    if (size == 0) return;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, align_up(size, alignment)) != 0) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data_); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<uint8_t> bytes() { return {data_, size_}; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sluice
