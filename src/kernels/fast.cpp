// Dispatch of the fast.h kernels: the AVX2 bodies (fast_avx2.cpp) when the CPU
// has AVX2 and FMA, else the scalar reference.
#include "kernels/fast.h"

#include <atomic>

#include "base/error.h"
#include "kernels/fast_avx2.h"
#include "kernels/ref.h"

namespace sluice::fast {
namespace {

std::atomic<Isa>& current_isa() {
  static std::atomic<Isa> isa{best_isa()};
  return isa;
}

inline bool use_avx2() {
#if defined(__x86_64__)
  return current_isa().load(std::memory_order_relaxed) == Isa::avx2;
#else
  return false;
#endif
}

}  // namespace

Isa best_isa() {
#if defined(__x86_64__)
  // libgcc also checks that the OS saves the ymm registers (XCR0).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
#endif
  return Isa::scalar;
}

Isa isa() { return current_isa().load(std::memory_order_relaxed); }

void set_isa(Isa want) {
  if (want == Isa::avx2 && best_isa() != Isa::avx2)
    throw Error("kernels: this CPU lacks AVX2/FMA, cannot select the avx2 kernels");
  current_isa().store(want, std::memory_order_relaxed);
}

const char* isa_name(Isa isa) { return isa == Isa::avx2 ? "avx2" : "scalar"; }

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y) {
#if defined(__x86_64__)
  if (use_avx2()) return avx2::matvec_bf16(W, rows, cols, x, y);
#endif
  ref::matvec_bf16(W, rows, cols, x, y);
}

void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y) {
#if defined(__x86_64__)
  if (use_avx2()) return avx2::matmul_bf16(W, rows, cols, X, n, Y);
#endif
  ref::matmul_bf16(W, rows, cols, X, n, Y);
}

void matvec_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* x, float* y) {
#if defined(__x86_64__)
  if (use_avx2()) return avx2::matvec_mxfp4(p, s, rows, cols, x, y);
#endif
  ref::matvec_mxfp4(p, s, rows, cols, x, y);
}

void matmul_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* X, int n,
                  float* Y) {
#if defined(__x86_64__)
  if (use_avx2()) return avx2::matmul_mxfp4(p, s, rows, cols, X, n, Y);
#endif
  ref::matmul_mxfp4(p, s, rows, cols, X, n, Y);
}

void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y) {
#if defined(__x86_64__)
  if (use_avx2()) return avx2::matvec_int8(W, rows, cols, x, y);
#endif
  ref::matvec_int8(W, rows, cols, x, y);
}

void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y) {
#if defined(__x86_64__)
  if (use_avx2()) return avx2::matmul_int8(W, rows, cols, X, n, Y);
#endif
  ref::matmul_int8(W, rows, cols, X, n, Y);
}

}  // namespace sluice::fast
