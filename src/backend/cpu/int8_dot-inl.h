// Per-target building blocks of the quantized matmul kernels (included by each matmul_q*.cpp
// inside its Highway target loop). On AVX2 and up a weight row is processed in 256-bit chunks of
// 32 bytes: DotU8S8 multiplies unsigned weight bytes by signed activation bytes and sums groups
// of four into int32 lanes, in one vpdpbusd on AVX512-VNNI (Highway's AVX3_DL target) or
// vpmaddubsw + vpmaddwd on AVX2/AVX-512. Below AVX2 the kernels fall back to integer loops.
//
// vpmaddubsw saturates a pair sum above 32767; every caller keeps the unsigned side <= 128 and
// the signed side in [-127, 127] (2 * 128 * 127 = 32512), so results are exact on every target.
#if defined(INFERA_INT8_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFERA_INT8_DOT_INL_H_
#undef INFERA_INT8_DOT_INL_H_
#else
#define INFERA_INT8_DOT_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/quant_matmul.h"
#include "quant/block_formats.h"

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
// Highway's AVX3_DL target string names AVX-VNNI but not AVX512-VNNI, which vpdpbusd on ymm
// needs; its run-time check does require AVX512-VNNI, so enabling it here is safe.
#if HWY_TARGET == HWY_AVX3_DL && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni")
#endif
namespace infera::cpu {
namespace HWY_NAMESPACE {

// The 512-bit VNNI paths (several blocks per vpdpbusd) are built by GCC only: Highway's AVX3_DL
// target names AVX-VNNI but not AVX512-VNNI, and GCC takes the pragma above, while clang (the
// fuzz build) would need the feature on every function the intrinsics inline into. Clang builds
// use the 256-bit per-block loops, which every file keeps as its fallback.
#undef INFERA_VNNI512
#if HWY_TARGET == HWY_AVX3_DL && !defined(__clang__)
#define INFERA_VNNI512 1
#else
#define INFERA_VNNI512 0
#endif

#undef INFERA_INT8_SIMD
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define INFERA_INT8_SIMD 1

HWY_INLINE __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
#if HWY_TARGET == HWY_AVX3_DL
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  const __m256i pairs = _mm256_maddubs_epi16(u, s);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

// acc + the int16 pairs of `pairs` times `scales`, summed into int32 lanes (vpdpwssd on AVX3_DL).
HWY_INLINE __m256i MaddAdd16(__m256i acc, __m256i pairs, __m256i scales) {
#if HWY_TARGET == HWY_AVX3_DL
  return _mm256_dpwssd_epi32(acc, pairs, scales);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
#endif
}

HWY_INLINE float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

HWY_INLINE float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

#else
#define INFERA_INT8_SIMD 0
HWY_INLINE float HalfToFloat(uint16_t h) { return quant::half_to_float(h); }
#endif

// Walks weight rows [j_begin, j_end) against n activation rows with Kernel::Row<NX>, which dots
// one weight row with NX <= 4 activation rows (sharing each weight block's unpacking among
// them). Decode (n <= 4) streams each weight row once. With more rows, weight rows are taken in
// panels of kPanel (a few KB, cache-resident) and every tile of 4 activation rows passes over the
// panel before the next one is read.
template <class Kernel>
void MatmulRowsQ(const uint8_t* acts, int64_t act_row_bytes, int64_t n, int64_t blocks,
                 const uint8_t* w, int64_t w_row_bytes, int64_t j_begin, int64_t j_end, float* out,
                 int64_t ldo) {
  constexpr int64_t kPanel = 16;
  const int64_t panel = n <= 4 ? j_end - j_begin : kPanel;
  for (int64_t jp = j_begin; jp < j_end; jp += panel) {
    const int64_t jp_end = std::min(j_end, jp + panel);
    for (int64_t i = 0; i < n; i += 4) {
      const uint8_t* a = acts + i * act_row_bytes;
      float* o = out + i * ldo;
      for (int64_t j = jp; j < jp_end; ++j) {
        const uint8_t* wr = w + j * w_row_bytes;
        switch (std::min<int64_t>(4, n - i)) {
          case 4:
            Kernel::template Row<4>(wr, a, act_row_bytes, blocks, o + j, ldo);
            break;
          case 3:
            Kernel::template Row<3>(wr, a, act_row_bytes, blocks, o + j, ldo);
            break;
          case 2:
            Kernel::template Row<2>(wr, a, act_row_bytes, blocks, o + j, ldo);
            break;
          default:
            Kernel::template Row<1>(wr, a, act_row_bytes, blocks, o + j, ldo);
            break;
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard
