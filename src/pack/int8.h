// pack/int8.h — the int8 spine format: symmetric int8 weights, one fp32 scale
// per group of kInt8Group values along a row.
//
// Why per group of 128 (not per row): measured on nanoK3's trained spine
// (bench/int8_quant.cpp, docs/packs.md), groups of 128 lose 0.634 % (relative
// weight error) against 0.681 % per row — and nanoK3's rows are only 64-768
// values long, so there "per row" is nearly groups of 256. A K3 row is 7168
// values: the largest |w| of a row grows with its length (one outlier flattens
// the resolution of every other value), so per-row loses more there. A group
// of 128 costs 4 bytes per 128 (3.1 % over int8 alone): 1.031 bytes per
// weight, 0.516 of bf16.
//
// Layout (the kernels' contract, kernels/ref.h): a matrix [rows][cols] is
// rows stored one after another, each
//     float scale[int8_groups(cols)]   (little-endian fp32)
//     int8  q[cols]
// and value c of a row is q[c] * scale[c / kInt8Group] (the last group may be
// shorter). A group's scale is max|w| / 127 (0 for an all-zero group) and
// q = round-half-even(w · (1 / scale)), in [-127, 127]: symmetric, no zero point.
// Whole rows are contiguous, so any run of rows (a spine piece, a pack
// block) is itself a valid int8 matrix.
#pragma once
#include <cstdint>

#include "kernels/ref.h"

namespace sluice {

using ref::int8_groups;
using ref::int8_row_bytes;
using ref::kInt8Group;

// Bytes of a [rows][cols] int8 matrix in the layout above.
inline uint64_t int8_matrix_bytes(int rows, int cols) { return uint64_t(rows) * int8_row_bytes(cols); }
// The same for 64-bit row counts (whole tensors).
inline uint64_t int8_matrix_bytes64(int64_t rows, int64_t cols) { return uint64_t(rows) * int8_row_bytes(int(cols)); }

// Quantizes bf16 rows [rows][cols] into `out` (int8_matrix_bytes(rows, cols)).
void quantize_int8_rows(const uint16_t* w, int rows, int cols, uint8_t* out);

// One row with an arbitrary group (group >= cols: one scale per row), into
// dequantized floats — for measuring a group size's error (bench/int8_quant.cpp).
void int8_roundtrip_row(const uint16_t* w, int cols, int group, float* out);

}  // namespace sluice
