// Reference (scalar) conversions between f32 rows and ggml blocks. Quantization follows ggml's
// reference quantizers (quantize_row_*_ref in llama.cpp's ggml-quants.c, the ones llama.cpp uses
// when no importance matrix is given), so files we write match what llama.cpp would write;
// dequantization is bit-identical to the `gguf` Python package (tests/quant). Kept plain: the
// kernels never dequantize a model, these run at quantize time, for embedding rows and in tests.
#pragma once

#include <cstdint>

#include "infera/tensor.h"

namespace infera::quant {

// `k` elements of `x` into dtype_bytes(dtype, k) bytes at `out`. k must be a multiple of
// dtype_block_size(dtype) (InvalidArgument otherwise). F32, F16 and BF16 are accepted too.
void quantize_row(DType dtype, const float* x, int64_t k, void* out);
// The inverse: `k` elements (a multiple of the block size) from `in` to `out`.
void dequantize_row(DType dtype, const void* in, int64_t k, float* out);

// The per-type reference routines behind them (k a multiple of the block size).
void quantize_row_q8_0(const float* x, int64_t k, void* out);
void quantize_row_q4_0(const float* x, int64_t k, void* out);
void quantize_row_q4_k(const float* x, int64_t k, void* out);
void quantize_row_q6_k(const float* x, int64_t k, void* out);
void dequantize_row_q8_0(const void* in, int64_t k, float* out);
void dequantize_row_q4_0(const void* in, int64_t k, float* out);
void dequantize_row_q4_k(const void* in, int64_t k, float* out);
void dequantize_row_q6_k(const void* in, int64_t k, float* out);

// Group-64 quantization (one scale per 64 weights) stored as Q8_0 / Q4_0 blocks whose pairs share
// the group's scale (quantize_group64.cpp says why). k must be a multiple of 64.
inline constexpr int kGroup64 = 64;
void quantize_row_q8_0_g64(const float* x, int64_t k, void* out);
void quantize_row_q4_0_g64(const float* x, int64_t k, void* out);

// ggml's nearest_int: round half to even through the 1.5 * 2^23 trick, valid for |x| < 2^22.
inline int nearest_int(float x) {
  const float shifted = x + 12582912.0f;
  int32_t bits;
  static_assert(sizeof(bits) == sizeof(shifted));
  __builtin_memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace infera::quant
