// Q8_0 and Q4_0: one f16 scale per 32 elements. Same arithmetic, in the same f32 order, as ggml's
// quantize_row_q8_0_ref / quantize_row_q4_0_ref and the `gguf` package's numpy versions, so the
// blocks are bit-identical to both (tests/quant).
#include <cmath>

#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace infera::quant {

void quantize_row_q8_0(const float* x, int64_t k, void* out) {
  auto* blocks = static_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < k / kQk0; ++b, x += kQk0) {
    float amax = 0.0f;
    for (int i = 0; i < kQk0; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_half(d);
    // roundf: halves away from zero, as ggml (and gguf's np_roundf).
    for (int i = 0; i < kQk0; ++i) blocks[b].qs[i] = static_cast<int8_t>(std::roundf(x[i] * inv));
  }
}

void quantize_row_q4_0(const float* x, int64_t k, void* out) {
  auto* blocks = static_cast<BlockQ4_0*>(out);
  for (int64_t b = 0; b < k / kQk0; ++b, x += kQk0) {
    // The signed value of largest magnitude (the first one on ties) maps to -8, so the full
    // range [-8, 7] is used on the side that needs it.
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kQk0; ++i) {
      if (amax < std::fabs(x[i])) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_half(d);
    for (int i = 0; i < kQk0 / 2; ++i) {
      // x * inv lies in [-8, 8]; + 8.5 and truncation round to nearest, 16 clamps to 15.
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[i] * inv + 8.5f)));
      const int hi =
          std::min(15, static_cast<int>(static_cast<int8_t>(x[i + kQk0 / 2] * inv + 8.5f)));
      blocks[b].qs[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

namespace detail {
#include "quant/dequantize_blocks-inl.h"
}  // namespace detail

void dequantize_row_q8_0(const void* in, int64_t k, float* out) {
  detail::DequantizeQ8_0(in, k, out);
}
void dequantize_row_q4_0(const void* in, int64_t k, float* out) {
  detail::DequantizeQ4_0(in, k, out);
}
void dequantize_row_q4_k(const void* in, int64_t k, float* out) {
  detail::DequantizeQ4_K(in, k, out);
}
void dequantize_row_q6_k(const void* in, int64_t k, float* out) {
  detail::DequantizeQ6_K(in, k, out);
}

}  // namespace infera::quant
