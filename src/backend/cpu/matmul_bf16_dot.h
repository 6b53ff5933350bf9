// bf16 x bf16 matmul through AVX512-BF16 dot products (vdpbf16ps: 32 bf16 products per
// instruction, twice the f32 FMA rate, and no widening of the weights). Used for bf16 weights
// when the backend is asked for bf16 activations (--matmul-precision bf16) and the CPU has the
// instructions. The activations are rounded to bf16 first, as a bf16 model in transformers or
// llama.cpp computes; the f32 path stays the default and the one the parity tests hold to 1e-4.
#pragma once

#include <cstdint>

namespace infera::cpu {

// True when this CPU executes AVX512-BF16 (checked once).
bool has_bf16_dot();

// dst[i] = bf16(src[i]), rounded to nearest even (denormals flush to zero, as vdpbf16ps treats
// its inputs). Requires has_bf16_dot().
void round_rows_to_bf16(const float* src, int64_t n, uint16_t* dst);

// out[i * ldo + j] = sum_p x[i * k + p] * w[j * k + p] for i < n, j in [j_begin, j_end), x and w
// bf16, sums in f32. One summation order whatever n is (one accumulator per output over the
// 32-element vectors in order, then across lanes), so a row's result does not depend on the rows
// that share the call. Requires has_bf16_dot().
void matmul_rows_bf16_dot(const uint16_t* x, int64_t n, int64_t k, const uint16_t* w,
                          int64_t j_begin, int64_t j_end, float* out, int64_t ldo);

}  // namespace infera::cpu
