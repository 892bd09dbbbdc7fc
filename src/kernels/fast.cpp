// The kernel choice (kernels/fast.h): made once, from the CPU and SLUICE_KERNELS.
#include "kernels/fast.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/backend.h"

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

Isa isa() {
  static const Isa chosen = initial_isa();
  return chosen;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::scalar: return "scalar";
  }
  return "unknown";
}

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y) {
  cpu_backend().matvec_bf16(Bf16Ref{W, rows, cols}, x, y);
}

void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y) {
  cpu_backend().matmul_bf16(Bf16Ref{W, rows, cols}, X, n, Y);
}

void matvec_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* x, float* y) {
  cpu_backend().matvec_mxfp4(Mxfp4Ref{p, s, rows, cols}, x, y);
}

void matmul_mxfp4(const uint8_t* p, const uint8_t* s, int rows, int cols, const float* X, int n, float* Y) {
  cpu_backend().matmul_mxfp4(Mxfp4Ref{p, s, rows, cols}, X, n, Y);
}

void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y) {
  cpu_backend().matvec_int8(Int8Ref{W, rows, cols}, x, y);
}

void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y) {
  cpu_backend().matmul_int8(Int8Ref{W, rows, cols}, X, n, Y);
}

}  // namespace sluice::fast
