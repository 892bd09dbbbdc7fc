// kernels/fast_avx2.h — the AVX2/FMA bodies of the matrix products (internal).
//
// fast_avx2.cpp is the only file compiled with -mavx2 -mfma; the avx2 and
// avx512 backend entries (kernels/backend.cpp) call these only on a CPU that
// has them, so the rest of the library stays baseline x86-64. Same contracts
// as kernels/products.h.
#pragma once
#include <cstdint>

#include "kernels/products.h"

namespace sluice::fast::avx2 {

SLUICE_MATRIX_PRODUCTS
// ref::quantize_int16_groups, bit for bit; xq has room for round_up(cols, 128) values.
void quantize_int16_groups(const float* x, int cols, int16_t* xq, float* xscale);

}  // namespace sluice::fast::avx2
