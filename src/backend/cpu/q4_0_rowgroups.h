// Q4_0 weights repacked at prepare time into row groups, so that the decode GEMV reads one
// contiguous stream that feeds four output rows at once (the GGUF layout feeds one row per
// stream; at k = 1024 a row is only 576 bytes).
//
// Layout: rows come in groups of kQ4_0GroupRows = 4; a group is k / 256 units of 8 blocks (256
// elements of each of the 4 rows, 576 bytes, the same bytes as the 32 blocks it holds):
//   bytes [0, 64):    the 32 f16 scales, scale of row r in block b at index 4 * b + r
//   bytes [64, 576):  block b's nibbles at 64 + 64 * b, row r's 16 bytes at + 16 * r (each as in
//                     BlockQ4_0::qs: low nibble = element j, high = element j + 16)
// so one 64-byte load holds one block of 4 rows, which one AND / shift splits into the low and
// high halves that vpdpbusd multiplies with a 128-bit broadcast of the activation block.
// A group takes 4 * dtype_bytes(Q4_0, k) bytes: the repacked tensor has the same size as the
// original and row group g starts where row 4g started.
#pragma once

#include <cstdint>

#include "quant/block_formats.h"

namespace infera::cpu {

constexpr int64_t kQ4_0GroupRows = 4;
constexpr int64_t kQ4_0UnitElements = 256;  // elements of each row per unit (8 blocks)
constexpr int64_t kQ4_0UnitBytes = 576;     // 4 rows x 8 blocks x 18 bytes

// Whether an m x k Q4_0 matrix can take the row-group layout (whole groups and whole units).
bool q4_0_rowgroups_fit(int64_t m, int64_t k);

// Plain GGUF rows (m x k) to the row-group layout; `out` holds the same number of bytes and must
// not overlap `w`. Requires q4_0_rowgroups_fit(m, k).
void q4_0_to_rowgroups(const void* w, int64_t m, int64_t k, void* out);

// Row j of a row-group matrix back as k / 32 plain blocks (bit-identical to the original row).
void q4_0_rowgroups_row(const void* w, int64_t k, int64_t j, quant::BlockQ4_0* out);

// out[i * ldo + j] = dot(activation row i, weight row j) for i < n and j in [j_begin, j_end),
// both multiples of kQ4_0GroupRows, on a row-group matrix; activations as for the plain Q4_0
// kernel (ActGroupQ4_0 rows, quant_matmul.h). 512-bit VNNI where built and supported; other
// targets restore each group's 4 rows and run the plain kernel over them.
void matmul_rows_q4_0_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo);

// True when matmul_rows_q4_0_rowgroups runs its 512-bit path on this CPU (the only case in which
// the CPU backend repacks: elsewhere the layout gains nothing).
bool q4_0_rowgroups_native();

}  // namespace infera::cpu
