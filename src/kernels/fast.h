// kernels/fast.h — the kernels the model calls on its hot path.
//
// Same contracts as kernels/ref.h. Matrix products use AVX2/FMA when the CPU
// has it and split rows over the kernel thread pool (kernels/threads.h); each
// output row is reduced by one thread in a fixed order, so results never depend
// on the thread count. kernels_test.cpp compares each one with ref:: on random
// inputs.
#pragma once
#include <cstdint>

namespace sluice::fast {

void matvec_bf16(const uint16_t* W, int rows, int cols, const float* x, float* y);
void matmul_bf16(const uint16_t* W, int rows, int cols, const float* X, int n, float* Y);
void matvec_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* x, float* y);
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scale, int rows, int cols,
                  const float* X, int n, float* Y);

}  // namespace sluice::fast
