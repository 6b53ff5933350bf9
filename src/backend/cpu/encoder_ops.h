// Raw-pointer kernels of the CPU backend's encoder ops (LayerNorm, GELU, GeGLU, bias, mean
// pooling). The backend has checked shapes and dtypes; see ops/backend.h for each contract.
#pragma once

#include <cstdint>

#include "backend/cpu/thread_pool.h"

namespace infera::cpu {

// weight, bias: F32 rows already widened; bias may be null.
void layernorm_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t dim,
                    const float* weight, const float* bias, float eps, float* out);
void gelu_erf(ThreadPool& pool, const float* x, int64_t n, float* out);
void geglu_erf(ThreadPool& pool, const float* input, const float* gate, int64_t n, float* out);
void add_bias_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t width, const float* bias,
                   float* out);
// out[b, :] = mean of x rows [starts[b], starts[b + 1]).
void mean_pool_rows(const float* x, int64_t width, const int32_t* starts, int64_t seqs, float* out);

}  // namespace infera::cpu
