// Dispatch of the fast.h kernels: the AVX-512 bodies (fast_avx512.cpp) or the
// AVX2 ones (fast_avx2.cpp) when the CPU has them, else the scalar reference.
#include "kernels/fast.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "kernels/fast_avx2.h"
#include "kernels/fast_avx512.h"
#include "kernels/ref.h"

namespace sluice::fast {
namespace {

// The best the CPU has, or SLUICE_KERNELS=scalar|avx2|avx512 when that names
// one it has (to compare them on one machine; the others are ignored, said once).
Isa initial_isa() {
  const Isa best = best_isa();
  const char* want = std::getenv("SLUICE_KERNELS");
  if (!want || !*want) return best;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (std::strcmp(want, isa_name(i)) == 0 && int(i) <= int(best)) return i;
  std::fprintf(stderr, "sluice: SLUICE_KERNELS=%s is not scalar, avx2 or avx512 on this CPU; using %s\n", want,
               isa_name(best));
  return best;
}

std::atomic<Isa>& current_isa() {
  static std::atomic<Isa> isa{initial_isa()};
  return isa;
}

inline bool use_simd() {
#if defined(__x86_64__)
  return current_isa().load(std::memory_order_relaxed) != Isa::scalar;
#else
  return false;
#endif
}

[[maybe_unused]] inline bool use_avx512() { return current_isa().load(std::memory_order_relaxed) == Isa::avx512; }

}  // namespace

Isa best_isa() {
#if defined(__x86_64__)
  // libgcc also checks that the OS saves the ymm / zmm registers (XCR0).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
      return Isa::avx512;
    return Isa::avx2;
  }
#endif
  return Isa::scalar;
}

Isa isa() { return current_isa().load(std::memory_order_relaxed); }

void set_isa(Isa want) {
  if (int(want) > int(best_isa()))
    throw Error(std::string("kernels: this CPU cannot run the ") + isa_name(want) + " kernels");
  current_isa().store(want, std::memory_order_relaxed);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::scalar: return "scalar";
  }
  return "unknown";
}

#if defined(__x86_64__)
namespace x86 {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y) {
  if (use_avx512()) return avx512::matvec_bf16(W, rows, cols, x, y);
  avx2::matvec_bf16(W, rows, cols, x, y);
}

void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y) {
  if (use_avx512()) return avx512::matmul_bf16(W, rows, cols, X, n, Y);
  avx2::matmul_bf16(W, rows, cols, X, n, Y);
}

void matvec_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* x, float* y) {
  if (use_avx512()) return avx512::matvec_mxfp4(p, s, rows, cols, x, y);
  avx2::matvec_mxfp4(p, s, rows, cols, x, y);
}

void matmul_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* X, int n,
                  float* Y) {
  if (use_avx512()) return avx512::matmul_mxfp4(p, s, rows, cols, X, n, Y);
  avx2::matmul_mxfp4(p, s, rows, cols, X, n, Y);
}

}  // namespace x86
#endif

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y) {
#if defined(__x86_64__)
  if (use_simd()) return x86::matvec_bf16(W, rows, cols, x, y);
#endif
  ref::matvec_bf16(W, rows, cols, x, y);
}

void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y) {
#if defined(__x86_64__)
  if (use_simd()) return x86::matmul_bf16(W, rows, cols, X, n, Y);
#endif
  ref::matmul_bf16(W, rows, cols, X, n, Y);
}

void matvec_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* x, float* y) {
#if defined(__x86_64__)
  if (use_simd()) return x86::matvec_mxfp4(p, s, rows, cols, x, y);
#endif
  ref::matvec_mxfp4(p, s, rows, cols, x, y);
}

void matmul_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* X, int n,
                  float* Y) {
#if defined(__x86_64__)
  if (use_simd()) return x86::matmul_mxfp4(p, s, rows, cols, X, n, Y);
#endif
  ref::matmul_mxfp4(p, s, rows, cols, X, n, Y);
}

void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y) {
#if defined(__x86_64__)
  if (use_simd()) return avx2::matvec_int8(W, rows, cols, x, y);
#endif
  ref::matvec_int8(W, rows, cols, x, y);
}

void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y) {
#if defined(__x86_64__)
  if (use_simd()) return avx2::matmul_int8(W, rows, cols, X, n, Y);
#endif
  ref::matmul_int8(W, rows, cols, X, n, Y);
}

}  // namespace sluice::fast
