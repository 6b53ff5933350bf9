// Group-64 quantization written into the existing 32-element block formats. A group of 64
// weights gets ONE scale (computed over all 64, as a group-64 quantizer does); both of its
// 32-element Q8_0 / Q4_0 blocks store that same f16 scale. The values are therefore exactly a
// group-64 quantization, and the project's Q8_0 / Q4_0 matmul kernels (every SIMD target, the
// integer decode path and the dequantizing prefill path) run them unchanged. The cost is one
// repeated f16 scale per 64 weights: 8.5 instead of 8.25 bits/weight (8-bit), 4.5 instead of 4.25
// (4-bit). A dedicated 66- or 34-byte block type would save those 3-6 % of weight bytes but needs
// a kernel per SIMD target; see docs/notes (issue 10) for the measured trade.
#include <algorithm>
#include <cmath>

#include "infera/error.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace infera::quant {
namespace {
void check_groups(int64_t k, const char* what) {
  if (k <= 0 || k % kGroup64 != 0)
    throw InvalidArgument(std::string(what) + ": row length " + std::to_string(k) +
                          " is not a multiple of the group size 64");
}
}  // namespace

void quantize_row_q8_0_g64(const float* x, int64_t k, void* out) {
  check_groups(k, "quantize_row_q8_0_g64");
  auto* blocks = static_cast<BlockQ8_0*>(out);
  for (int64_t g = 0; g < k / kGroup64; ++g, x += kGroup64) {
    float amax = 0.0f;
    for (int i = 0; i < kGroup64; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int half = 0; half < 2; ++half) {
      BlockQ8_0& b = blocks[2 * g + half];
      b.d = float_to_half(d);
      for (int i = 0; i < kQk0; ++i)
        b.qs[i] = static_cast<int8_t>(std::roundf(x[half * kQk0 + i] * inv));
    }
  }
}

void quantize_row_q4_0_g64(const float* x, int64_t k, void* out) {
  check_groups(k, "quantize_row_q4_0_g64");
  auto* blocks = static_cast<BlockQ4_0*>(out);
  for (int64_t g = 0; g < k / kGroup64; ++g, x += kGroup64) {
    // As ggml's Q4_0: the signed value of largest magnitude maps to -8 (over the whole group).
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kGroup64; ++i) {
      if (amax < std::fabs(x[i])) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int half = 0; half < 2; ++half) {
      BlockQ4_0& b = blocks[2 * g + half];
      const float* xs = x + half * kQk0;
      b.d = float_to_half(d);
      for (int i = 0; i < kQk0 / 2; ++i) {
        const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(xs[i] * inv + 8.5f)));
        const int hi =
            std::min(15, static_cast<int>(static_cast<int8_t>(xs[i + kQk0 / 2] * inv + 8.5f)));
        b.qs[i] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

}  // namespace infera::quant
