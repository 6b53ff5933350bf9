// ggml's block layouts for the quantized weight types, byte for byte (GGUF files store these
// blocks, and we compute on them in place). Each block covers a run of consecutive elements of one
// row; see DType in include/infera/tensor.h for the row rule.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype_convert.h"

namespace infera::quant {

constexpr int kQk0 = 32;   // elements per Q8_0 / Q4_0 block
constexpr int kQkK = 256;  // elements per K-quant super-block

// x = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[kQk0];
};
// x = d * (q - 8); byte j holds element j in its low nibble and element j + 16 in its high one.
struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[kQk0 / 2];
};
// 8 sub-blocks of 32: x = d * sc[s] * q - dmin * m[s], sc and m 6-bit (packed in `scales`, see
// q4_k_scale_min). qs: 4 chunks of 32 bytes; chunk c holds sub-block 2c in the low nibbles and
// sub-block 2c + 1 in the high nibbles.
struct BlockQ4_K {
  uint16_t d;     // f16, scale of the sub-block scales
  uint16_t dmin;  // f16, scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qs[kQkK / 2];
};
// 16 sub-blocks of 16: x = d * scales[s] * (q - 32), q 6-bit: low 4 bits in ql, high 2 in qh.
// Per half of 128 elements (ql 64 bytes, qh 32 bytes), element l + 32 * g (l < 32, g < 4) has
// low bits ql[l + 32 * (g & 1)] >> (4 * (g >> 1)) and high bits qh[l] >> (2 * g).
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;  // f16
};

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

// 6-bit scale and min of Q4_K sub-block j (0..7) from the 12 packed bytes: j < 4 sit in the low
// six bits of bytes j and j + 4; j >= 4 keep their low nibbles in byte j + 4 and their top two
// bits in the spare high bits of bytes j - 4 (scale) and j (min).
inline void q4_k_scale_min(int j, const uint8_t* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// IEEE half <-> float. Round-to-nearest-even (as numpy's astype(float16), F16C and ggml).
// ggml's fp16 scales: the core conversions (round to nearest even, as numpy's float16 cast).
inline float half_to_float(uint16_t h) { return f16_to_f32(h); }
inline uint16_t float_to_half(float f) { return f32_to_f16(f); }

}  // namespace infera::quant
