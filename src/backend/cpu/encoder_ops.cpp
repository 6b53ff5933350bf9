// The CPU kernels of the encoder ops: plain loops over rows split across the thread pool (their
// cost is small next to the matmuls around them), dot products through the SIMD kernels.
#include "backend/cpu/encoder_ops.h"

#include <cmath>

#include "backend/cpu/simd_kernels.h"

namespace infera::cpu {
namespace {
// 0.5 * x * (1 + erf(x / sqrt(2))): torch's exact GELU, in f32 as torch computes it.
inline float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
}  // namespace

void layernorm_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t dim,
                    const float* weight, const float* bias, float eps, float* out) {
  pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * dim;
      float* yr = out + r * dim;
      float sum = 0.0f;
      for (int64_t i = 0; i < dim; ++i) sum += xr[i];
      const float mean = sum / static_cast<float>(dim);
      // Deviations first (yr may alias xr: each element is read before it is written), then the
      // biased variance of them, as torch does (no E[x^2] - E[x]^2 cancellation).
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] - mean;
      const float var = dot_f32(yr, yr, dim) / static_cast<float>(dim);
      const float inv = 1.0f / std::sqrt(var + eps);
      if (bias) {
        for (int64_t i = 0; i < dim; ++i) yr[i] = yr[i] * inv * weight[i] + bias[i];
      } else {
        for (int64_t i = 0; i < dim; ++i) yr[i] = yr[i] * inv * weight[i];
      }
    }
  });
}

void gelu_erf(ThreadPool& pool, const float* x, int64_t n, float* out) {
  pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = gelu(x[i]);
  });
}

void geglu_erf(ThreadPool& pool, const float* input, const float* gate, int64_t n, float* out) {
  pool.parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = gelu(input[i]) * gate[i];
  });
}

void add_bias_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t width, const float* bias,
                   float* out) {
  pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t i = 0; i < width; ++i) out[r * width + i] = x[r * width + i] + bias[i];
  });
}

void mean_pool_rows(const float* x, int64_t width, const int32_t* starts, int64_t seqs,
                    float* out) {
  for (int64_t b = 0; b < seqs; ++b) {
    float* o = out + b * width;
    for (int64_t i = 0; i < width; ++i) o[i] = 0.0f;
    for (int64_t r = starts[b]; r < starts[b + 1]; ++r)
      for (int64_t i = 0; i < width; ++i) o[i] += x[r * width + i];
    const auto count = static_cast<float>(starts[b + 1] - starts[b]);
    for (int64_t i = 0; i < width; ++i) o[i] /= count;
  }
}

}  // namespace infera::cpu
