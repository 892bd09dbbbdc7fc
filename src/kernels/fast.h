// kernels/fast.h — the kernels the model calls on its hot path.
//
// Same contracts as kernels/ref.h. Matrix products use AVX2/FMA when the CPU
// has it (kernels/fast_avx2.cpp; AVX-512 bodies with the same bits where the
// CPU has AVX-512, kernels/fast_avx512.cpp) and split rows over the kernel thread pool
// (kernels/threads.h); each output row is reduced by one thread in a fixed
// order, so results never depend on the thread count, and matmul gives
// bitwise the same row results for each token as matvec on that token (prefill
// equals token-by-token decode). On other CPUs they forward to ref::.
// kernels_test.cpp compares each one with ref:: on random inputs: they agree
// to 1e-5 of sum |w·x| (different summation order). Weights are assumed
// finite: an MXFP4 value that overflows FP32 (e.g. 6·2^127) gives a
// non-finite result, though it may be inf where ref gives NaN.
//
// Work and scratch: a call permutes its activations into a scratch buffer
// owned by the calling thread (kept between calls), and runs on the kernel
// pool when it has at least ~128K multiply-adds. See docs/kernels.md.
#pragma once
#include <cstdint>

namespace sluice::fast {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y);
void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y);
void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* x, float* y);
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* X, int n, float* Y);
// int8 rows with per-group fp32 scales (kernels/ref.h, the int8 spine).
void matvec_int8(const uint8_t* W, int rows, int cols, const float* x, float* y);
void matmul_int8(const uint8_t* W, int rows, int cols, const float* X, int n, float* Y);

// Which implementation the functions above run: the best the CPU supports,
// unless a test or benchmark picks another. scalar and the SIMD ones differ in
// the last bits (different summation order); avx2 and avx512 give the same
// bits (avx512 does the same operations two rows per register; its int8
// products are the AVX2 ones). Within one, results are reproducible.
enum class Isa { scalar, avx2, avx512 };  // scalar = ref::, single-threaded; ordered: each has the ones before
Isa best_isa();
Isa isa();
void set_isa(Isa isa);  // throws sluice::Error if this CPU cannot run it
const char* isa_name(Isa isa);

}  // namespace sluice::fast
