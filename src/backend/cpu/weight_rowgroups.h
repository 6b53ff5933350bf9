// Q4_0, Q4_K, Q6_K and Q8_0 weights repacked at prepare time into row groups, so that the decode
// GEMV reads one contiguous stream that feeds four output rows at once (the GGUF layout feeds one
// row per stream, and the kernel then repeats per row what could be shared: activation loads, scale
// unpacking, lane reductions). At k = 1024 a Q4_0 row is only 576 bytes.
//
// Rows come in groups of kGroupRows = 4; a group is k / 256 units of rowgroup_unit_bytes (256
// elements of each of the 4 rows: the same bytes as the blocks it holds; 576 for the 4-bit types,
// 840 for Q6_K), row group g starting where row 4g started, so the repacked tensor has the
// original's size (Q8_0: 1088-byte units of 8 blocks). One 64-byte load always holds 16
// bytes of nibbles of each of the 4 rows, which one AND / shift splits into low and high nibbles
// that vpdpbusd multiplies with a 128-bit broadcast of the matching 16 activation bytes; the
// int32 lanes 4r..4r+3 then belong to row r.
//
// Q4_0 unit (8 blocks of each row):
//   [0, 64)    the 32 f16 scales, row r's block b at index 4 * b + r
//   [64, 576)  block b's nibbles at 64 + 64 * b, row r's 16 bytes at + 16 * r (as BlockQ4_0::qs)
// Q4_K unit (one super-block of each row):
//   [0, 8)     d of rows 0..3 (f16);  [8, 16) dmin of rows 0..3
//   [16, 64)   the packed 6-bit scales / mins by 32-bit word: word w of row r at 16 + 16w + 4r
//              (so one 128-bit load holds word w of all 4 rows and unpacks them at once)
//   [64, 576)  line j (j < 8) at 64 + 64j: row r's 16 bytes at + 16r, qs bytes [32l + 4j, +4)
//              (4 bytes of chunk l) at + 4l, so that every dword of a line holds one sub-block's
//              elements of one row (2l in the low nibbles, 2l + 1 in the high ones) and the
//              kernel applies each sub-block's scale once a unit (matmul_q4_k.cpp)
// Q6_K unit (one super-block of each row; 16 elements of one row per 16 bytes, so a 64-byte line
// holds one 16-element group of each of the 4 rows, the group one scale covers):
//   [0, 64)    the int8 scales, row r's 16 at 16r
//   [64, 72)   d of rows 0..3 (f16)
//   [72, 840)  for s = 2h + t (h, t in {0, 1}), at 72 + 192s: ql bytes [64h + 16t, +16) of row r
//              at + 16r (low nibbles: elements 128h + 16t + [0, 16), high: + 64), ql bytes
//              [64h + 32 + 16t, +16) at + 64 + 16r (elements + 32 and + 96), qh bytes
//              [32h + 16t, +16) at + 128 + 16r (their 2-bit highs, bits 2g for element + 32g)
//   The scales and d come first, as in every other unit: the kernel reads them before the
//   quants, and with them at the unit's end each unit's first access jumped past the lines it
//   then read, which measured x0.77 from DRAM on the Zen 4 VM (the hardware prefetchers follow
//   ascending streams; bench/probes/rowgroup_dram_probe.cpp, session 19).
// Q8_0 unit (8 blocks of each row; the Q4_0 unit with whole bytes instead of nibbles):
//   [0, 64)     the 32 f16 scales, row r's block b at index 4 * b + r
//   [64, 1088)  block b's qs at 64 + 128 * b: bytes [0, 16) of row r at + 16 * r, bytes
//               [16, 32) at + 64 + 16 * r (so each 64-byte line is 16 elements of the 4 rows)
#pragma once

#include <cstdint>

#include "infera/tensor.h"

namespace infera::cpu {

constexpr int64_t kGroupRows = 4;
constexpr int64_t kUnitElements = 256;    // elements of each row per unit
constexpr int64_t kUnitBytes = 576;       // Q4_0, Q4_K: 4 rows x 256 elements x 4.5 bits
constexpr int64_t kUnitBytesQ6_K = 840;   // 4 rows x 256 elements x 6.5625 bits
constexpr int64_t kQ6_KQuantsOffset = 72;  // the Q6_K unit's quants after its scales and d
constexpr int64_t kUnitBytesQ8_0 = 1088;  // 4 rows x 256 elements x 8.5 bits
// Bytes of one unit of `dtype` (a row-group type).
int64_t rowgroup_unit_bytes(DType dtype);
// How far ahead of the unit in use the row-group GEMVs prefetch the weights with software
// prefetches, in bytes (0: none, the hardware prefetchers alone): INFERA_CPU_ROWGROUP_PREFETCH =
// a multiple of 64 in [0, 65536], read once (anything else throws InvalidArgument naming it, at
// the first row-group matmul). The drivers (int8_dot-inl.h) prefetch each unit's lines before
// the unit's kernel runs. Default kDefaultRowGroupPrefetchBytes (the cpuq8 note: on this
// project's AMD Zen 4 VM the 1 KiB prefetch, earlier hosts' best, measured slower than none).
constexpr int64_t kDefaultRowGroupPrefetchBytes = 0;
int64_t rowgroup_prefetch_bytes();
// Overrides the setting (tests, benchmarks); same range.
void set_rowgroup_prefetch_bytes(int64_t bytes);

// Whether an m x k matrix of `dtype` can take the row-group layout (Q4_0, Q4_K, Q6_K, Q8_0; whole
// groups and whole units).
bool rowgroups_fit(DType dtype, int64_t m, int64_t k);

// Plain GGUF rows (m x k) to the row-group layout; `out` holds the same number of bytes and must
// not overlap `w`. Requires rowgroups_fit(dtype, m, k).
void to_rowgroups(DType dtype, const void* w, int64_t m, int64_t k, void* out);

// Row j of a row-group matrix back as it was in the file (dtype_bytes(dtype, k) bytes, bit for
// bit).
void rowgroups_row(DType dtype, const void* w, int64_t k, int64_t j, void* out);

// out[i * ldo + j] = dot(activation row i, weight row j) for i < n and j in [j_begin, j_end),
// both multiples of kGroupRows, on a row-group matrix; activations as for the plain kernel of the
// type (quant_matmul.h). 512-bit VNNI where built and supported; other targets restore each
// group's 4 rows and run the plain kernel over them.
void matmul_rows_rowgroups(DType dtype, const void* acts, int64_t n, int64_t k, const void* w,
                           int64_t j_begin, int64_t j_end, float* out, int64_t ldo);

// True when matmul_rows_rowgroups runs its 512-bit path for `dtype` on this CPU (the only case in
// which the CPU backend repacks: elsewhere the layout gains nothing).
bool rowgroups_native(DType dtype);

}  // namespace infera::cpu
