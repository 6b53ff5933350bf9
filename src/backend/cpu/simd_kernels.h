// SIMD kernels of the CPU backend, compiled for every x86 target Highway knows (SSE4, AVX2,
// AVX-512, AVX-512 with BF16/VNNI...) and dispatched once per call at run time, so one binary
// runs on any x86-64 machine and uses the best instructions it has.
#pragma once

#include <cstdint>

#include "infera/tensor.h"

namespace infera::cpu {

// out[i * ldo + j] = sum_p x[i * k + p] * w[j * k + p], for i in [0, n), j in [j_begin, j_end).
// w points at the whole weight (rows of k elements of `wtype`: F32, F16 or BF16).
// `panel` is scratch of at least kPanelRows * k floats (weights widened once per panel when n
// is large enough to reuse them).
constexpr int64_t kPanelRows = 16;
void matmul_rows(const float* x, int64_t n, int64_t k, const void* w, DType wtype, int64_t j_begin,
                 int64_t j_end, float* out, int64_t ldo, float* panel);

// matmul_rows twice, x_a against rows [0, rows) of w_a into out_a and x_b against w_b into out_b
// (the same ldo), the same bits; for a decode block of x rows (fewer than the register tile's)
// row j of w_a and row j of w_b take turns, so two weight streams are in flight on the thread.
void matmul_rows_pair(const float* xa, const float* xb, int64_t n, int64_t k, const void* wa,
                      const void* wb, DType wtype, int64_t rows, float* outa, float* outb,
                      int64_t ldo, float* panel);

float dot_f32(const float* a, const float* b, int64_t n);
// dst[i] = float(src[i]) for a weight row of `wtype`.
void widen_row(const void* src, DType wtype, int64_t n, float* dst);

// s[i] = exp(s[i] * scale - max_j s[j] * scale) for i < n; returns their sum. scale > 0.
float softmax_numerators_f32(float* s, int64_t n, float scale);
// o[i] = silu(g[i]) * u[i] for i < n (the SwiGLU gate; o may be g), vectorised exp: within a few
// f32 ulps of the scalar formula. The swiglu op and the fused decode matmul both call it.
void silu_mul_f32(const float* g, const float* u, float* o, int64_t n);
// out[0, d) (+)= sum_{t < count} p[t] * v[t * d .. t * d + d): a probability-weighted sum of rows
// of `vtype` (F32, F16 or BF16). With `accumulate`, adds to out in the order a single call over
// all the rows would, so a sum split across cache blocks is bit-identical to an unsplit one.
void weighted_row_sum(const float* p, int64_t count, const void* v, DType vtype, int64_t d,
                      float* out, bool accumulate);

// weighted_row_sum for `rows` (<= kWeightedRows) rows of probabilities over the same value rows:
// out[r] (+)= sum_t p[r][t] * v[t], bit-identical to one weighted_row_sum per row, with each
// value vector loaded once for all the rows (2 or more of them).
constexpr int kWeightedRows = 4;
void weighted_rows_sum(const float* const* p, int rows, int64_t count, const void* v, DType vtype,
                       int64_t d, float* const* out, bool accumulate);

// Attention scores against one tile of keys stored transposed: out[r * ldo + j] =
// sum_e q[r * d + e] * kt[e * kScoreTileKeys + j] for r < rows, j < cols <= kScoreTileKeys.
// Outer-product form (a query element broadcast against a vector of keys), so no output needs a
// horizontal sum; each output adds its d products in order e = 0..d-1.
constexpr int64_t kScoreTileKeys = 32;
void scores_tile_f32(const float* q, int64_t rows, int64_t d, const float* kt, int64_t cols,
                     float* out, int64_t ldo);

// dst[i] = f32_to_bf16(src[i]) (round to nearest even, NaN kept quiet): the same bits as the
// scalar conversion, a vector at a time (the KV cache's bf16 rows).
void round_to_bf16(const float* src, int64_t n, uint16_t* dst);

// Name of the instruction set chosen at run time ("AVX3", "AVX2", ...).
const char* simd_target_name();

}  // namespace infera::cpu
