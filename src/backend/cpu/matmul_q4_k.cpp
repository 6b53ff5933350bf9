// Q4_K weights x Q8K activations. Per super-block of 256 and sub-block s of 32:
//   w = d * sc[s] * q - dmin * m[s]  (q the 4-bit nibble)
//   sum(w * a) = d_a * (d * sum_s sc[s] * sum(q * a_s) - dmin * sum_s m[s] * sum(a_s))
// The first sum is integer byte dot products weighted by the 6-bit scales; the second uses the
// activation block's 16-element sums, so the mins cost 8 multiplies per super-block.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_q4_k.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/int8_dot-inl.h"
#include "backend/cpu/quant_matmul.h"
#include "quant/block_formats.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni")
#endif
namespace infera::cpu {
namespace HWY_NAMESPACE {

struct KernelQ4_K {
  template <int NX>
  static HWY_INLINE void Row(const uint8_t* wrow, const uint8_t* acts, int64_t act_row_bytes,
                             int64_t blocks, float* out, int64_t ldo) {
    const auto* w = reinterpret_cast<const quant::BlockQ4_K*>(wrow);
    const ActBlockQ8K* a[NX];
    for (int x = 0; x < NX; ++x)
      a[x] = reinterpret_cast<const ActBlockQ8K*>(acts + x * act_row_bytes);
    float mins[NX] = {};  // sum over super-blocks of dmin * d_a * sum_s m[s] * sum(a_s)
#if INFERA_INT8_SIMD
    __m256 acc[NX];
    for (int x = 0; x < NX; ++x) acc[x] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
#else
    float acc[NX] = {};
#endif
    for (int64_t b = 0; b < blocks; ++b) {
      const quant::BlockQ4_K& blk = w[b];
      uint8_t sc[8], m[8];
      for (int s = 0; s < 8; ++s) quant::q4_k_scale_min(s, blk.scales, sc[s], m[s]);
      const float d = HalfToFloat(blk.d), dmin = HalfToFloat(blk.dmin);
      for (int x = 0; x < NX; ++x) {
        int32_t msum = 0;
        for (int s = 0; s < 8; ++s)
          msum += m[s] * (a[x][b].bsums[2 * s] + a[x][b].bsums[2 * s + 1]);
        mins[x] += dmin * a[x][b].d * static_cast<float>(msum);
      }
#if INFERA_INT8_SIMD
      __m256i q[8];
      for (int c = 0; c < 4; ++c) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
        q[2 * c] = _mm256_and_si256(raw, low4);
        q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      }
      for (int x = 0; x < NX; ++x) {
        __m256i sumi = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          const __m256i aq =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[x][b].qs + 32 * s));
          const __m256i p = DotU8S8(_mm256_setzero_si256(), q[s], aq);
          sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(p, _mm256_set1_epi32(sc[s])));
        }
        acc[x] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d * a[x][b].d), acc[x]);
      }
#else
      for (int x = 0; x < NX; ++x) {
        int32_t sumi = 0;
        for (int s = 0; s < 8; ++s) {
          const uint8_t* qs = blk.qs + 32 * (s / 2);
          const int shift = 4 * (s % 2);
          int32_t dot = 0;
          for (int l = 0; l < 32; ++l) dot += ((qs[l] >> shift) & 0xF) * a[x][b].qs[32 * s + l];
          sumi += sc[s] * dot;
        }
        acc[x] += static_cast<float>(sumi) * (d * a[x][b].d);
      }
#endif
    }
#if INFERA_INT8_SIMD
    for (int x = 0; x < NX; ++x) out[x * ldo] = HorizontalSum(acc[x]) - mins[x];
#else
    for (int x = 0; x < NX; ++x) out[x * ldo] = acc[x] - mins[x];
#endif
  }
};

void MatmulRowsQ4_K(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                    int64_t j_end, float* out, int64_t ldo) {
  const int64_t blocks = k / quant::kQkK;
  MatmulRowsQ<KernelQ4_K>(
      static_cast<const uint8_t*>(acts), blocks * static_cast<int64_t>(sizeof(ActBlockQ8K)), n,
      blocks, static_cast<const uint8_t*>(w),
      blocks * static_cast<int64_t>(sizeof(quant::BlockQ4_K)), j_begin, j_end, out, ldo);
}

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(MatmulRowsQ4_K);
void matmul_rows_q4_k(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ4_K)(acts, n, k, w, j_begin, j_end, out, ldo);
}
}  // namespace infera::cpu
#endif
