// kernels/fast.h — the kernel choice, and the matrix products of the CPU
// entry it picks (for probes and benchmarks that call a product directly).
//
// The CPU backend entries (kernels/backend.h) are `scalar` (ref::, one
// thread), `avx2` (kernels/fast_avx2.cpp) and `avx512` (kernels/fast_avx512.cpp
// for the bf16 and MXFP4 products, the AVX2 int8 ones); the choice among them
// is made once, at startup: the best the CPU has, or SLUICE_KERNELS=scalar|
// avx2|avx512 when that names one it has (to compare them on one machine; any
// other value is ignored, said once on stderr). cpu_backend() is that entry.
//
// scalar and the SIMD ones differ in the last bits (different summation
// order); avx2 and avx512 give the same bits (avx512 does the same operations
// two rows per register). Within one, results are reproducible and
// independent of the thread count, and matmul gives bitwise the same row
// results for each token as matvec on that token (prefill equals decode).
// The SIMD products split rows over the kernel thread pool (kernels/threads.h)
// when a call has at least ~128K multiply-adds; see docs/kernels.md. Weights
// are assumed finite: an MXFP4 value that overflows FP32 (e.g. 6·2^127) gives
// a non-finite result, though it may be inf where ref gives NaN.
#pragma once
#include <cstdint>

#include "kernels/products.h"

namespace sluice::fast {

// The products of cpu_backend() (same contracts as kernels/products.h).
SLUICE_MATRIX_PRODUCTS

enum class Isa { scalar, avx2, avx512 };  // ordered: each has the ones before
// The best this CPU (and build) can run.
Isa best_isa();
// The choice made at startup (above); never changes within a process.
Isa isa();
const char* isa_name(Isa isa);

}  // namespace sluice::fast
