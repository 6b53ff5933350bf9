// The rotation of one RoPE (x[j], x[j + half]) pair: one expression for every RoPE kernel that
// must round alike (rope, rope_attention_packed's staging, the encoder stack's bf16 staging and
// the packed wgmma attention's in-kernel RoPE), so that they produce the same bits.
#pragma once

namespace infera::cuda {

__device__ __forceinline__ void rope_rotate(float a, float b, float c, float s, float& lo,
                                            float& hi) {
  lo = a * c - b * s;
  hi = b * c + a * s;
}

}  // namespace infera::cuda
