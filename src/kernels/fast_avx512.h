// kernels/fast_avx512.h — AVX-512 bodies of the bf16 and MXFP4 products (internal).
//
// fast_avx512.cpp is the only file compiled with -mavx512f/bw/dq/vl; the
// avx512 backend entry (kernels/backend.cpp) calls these only when the CPU
// has them. They give the same bits as the fast_avx2.h functions of the same
// name (same reduction order, two rows per register). Same contracts as
// kernels/products.h. The int8 products have no AVX-512 body: the avx512
// entry runs the AVX2 ones.
#pragma once
#include <cstdint>

#include "kernels/products.h"

namespace sluice::fast::avx512 {

SLUICE_FLOAT_PRODUCTS

}  // namespace sluice::fast::avx512
