// The rotation of one RoPE (x[j], x[j + half]) pair: one expression for every RoPE kernel that
// must round alike (rope, rope_attention_packed's staging, the encoder stack's bf16 staging and
// the packed wgmma attention's in-kernel RoPE), so that they produce the same bits. The products
// and their fused sums are spelled out: left to the compiler, `a * c - b * s` may be contracted
// into an FMA on either product, and the choice can differ between translation units.
#pragma once

namespace infera::cuda {

__device__ __forceinline__ void rope_rotate(float a, float b, float c, float s, float& lo,
                                            float& hi) {
  lo = __fmaf_rn(a, c, -__fmul_rn(b, s));
  hi = __fmaf_rn(b, c, __fmul_rn(a, s));
}

}  // namespace infera::cuda
