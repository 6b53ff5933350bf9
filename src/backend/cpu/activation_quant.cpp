// The decode GEMVs' activation quantization on the widest SIMD target the CPU has: it runs on the
// calling thread before every decode GEMV section while the other threads wait (113 times a
// Qwen3-0.6B token), so its time is serial time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/activation_quant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/quant_matmul.h"

HWY_BEFORE_NAMESPACE();
namespace infera::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// max |x[i]| of n floats, and the factor 127 / max that quantizes them (0 for an all-zero group).
HWY_INLINE float GroupMax(const float* HWY_RESTRICT x, int64_t n, float& inv) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  auto vmax = hn::Zero(df);
  for (; i + lanes <= n; i += lanes) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, x + i)));
  float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  return amax;
}

// quant_matmul.h's group quantization: d = max|x| / 127, q = x * (127 / max|x|) rounded half to
// even. The product is the scalar one lane by lane, the conversion rounds to nearest even (the
// default mode) and |q| <= 127 converts exactly, so every target gives the same bytes.
float QuantizeGroup(const float* HWY_RESTRICT x, int64_t n, int8_t* HWY_RESTRICT q) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  float inv;
  const float amax = GroupMax(x, n, inv);
  const auto vinv = hn::Set(df, inv);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::DemoteTo(d8, hn::NearestInt(hn::Mul(hn::LoadU(df, x + i), vinv))), d8, q + i);
  for (; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * inv));
  return amax / 127.0f;
}

// A row of Q8_0 activation blocks (quant_matmul.h's ActBlockQ8): each 32-element group as
// QuantizeGroup, and the offset lanes -128 * (q[4l..4l+3] + q[16+4l..16+4l+3]) from the same
// integers before they are narrowed. One dispatch a row instead of one a block.
void QuantizeRowQ8(const float* HWY_RESTRICT x, int64_t k, ActBlockQ8* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  // Every x86 target's vectors (1 to 16 floats) tile a half block exactly.
  static_assert(16 % hn::MaxLanes(decltype(df)()) == 0, "a half block is whole vectors");
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    float inv;
    const float amax = GroupMax(xb, 32, inv);
    const auto vinv = hn::Set(df, inv);
    alignas(64) int32_t pair[16];  // q[j] + q[16 + j]
    for (int64_t i = 0; i < 16; i += lanes) {
      const auto lo = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), vinv));
      const auto hi = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + 16 + i), vinv));
      hn::StoreU(hn::DemoteTo(d8, lo), d8, out[b].qs + i);
      hn::StoreU(hn::DemoteTo(d8, hi), d8, out[b].qs + 16 + i);
      hn::Store(hn::Add(lo, hi), di, pair + i);
    }
    out[b].d = amax / 127.0f;
    for (int l = 0; l < 4; ++l)
      out[b].offset[l] = out[b].offset[l + 4] =
          -128 * (pair[4 * l] + pair[4 * l + 1] + pair[4 * l + 2] + pair[4 * l + 3]);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(QuantizeGroup);
HWY_EXPORT(QuantizeRowQ8);
float quantize_activation_group(const float* x, int64_t n, int8_t* q) {
  return HWY_DYNAMIC_DISPATCH(QuantizeGroup)(x, n, q);
}
void quantize_activation_row_q8(const float* x, int64_t k, ActBlockQ8* out) {
  HWY_DYNAMIC_DISPATCH(QuantizeRowQ8)(x, k, out);
}
}  // namespace infera::cpu
#endif
