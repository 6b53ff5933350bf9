// Q4_0 weights x Q8 activations: a block's nibbles q in [0, 15] stand for q - 8, so
// sum((q - 8) * a) = sum(q * a) - 8 * sum(a): the nibbles go straight into the unsigned side of
// the byte dot product, which starts from the activation block's precomputed -8 * sums.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_q4_0.cpp"
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

struct KernelQ4_0 {
  template <int NX>
  static HWY_INLINE void Row(const uint8_t* wrow, const uint8_t* acts, int64_t act_row_bytes,
                             int64_t blocks, float* out, int64_t ldo) {
    const auto* w = reinterpret_cast<const quant::BlockQ4_0*>(wrow);
    const ActBlockQ8* a[NX];
    for (int x = 0; x < NX; ++x)
      a[x] = reinterpret_cast<const ActBlockQ8*>(acts + x * act_row_bytes);
#if INFERA_INT8_SIMD
    // Two accumulators per row (even and odd blocks) keep two FMA chains in flight.
    __m256 acc[NX][2];
    for (int x = 0; x < NX; ++x) acc[x][0] = acc[x][1] = _mm256_setzero_ps();
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int64_t b = 0; b < blocks; ++b) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
      // Elements 0..15 are the low nibbles, 16..31 the high ones: the activation order.
      const __m256i q =
          _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), low4), _mm_and_si128(raw, low4));
      const float dw = HalfToFloat(w[b].d);
      for (int x = 0; x < NX; ++x) {
        const ActBlockQ8& ab = a[x][b];
        const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
        const __m256i start = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.offset));
        const __m256i p = DotU8S8(start, q, aq);  // sum((q - 8) * a) per lane
        acc[x][b & 1] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ab.d), acc[x][b & 1]);
      }
    }
    for (int x = 0; x < NX; ++x) out[x * ldo] = HorizontalSum(_mm256_add_ps(acc[x][0], acc[x][1]));
#else
    for (int x = 0; x < NX; ++x) {
      float sum = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t dot = 0;
        for (int i = 0; i < quant::kQk0 / 2; ++i) {
          dot += ((w[b].qs[i] & 0xF) - 8) * a[x][b].qs[i];
          dot += ((w[b].qs[i] >> 4) - 8) * a[x][b].qs[i + quant::kQk0 / 2];
        }
        sum += static_cast<float>(dot) * (HalfToFloat(w[b].d) * a[x][b].d);
      }
      out[x * ldo] = sum;
    }
#endif
  }
};

void MatmulRowsQ4_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                    int64_t j_end, float* out, int64_t ldo) {
  const int64_t blocks = k / quant::kQk0;
  MatmulRowsQ<KernelQ4_0>(
      static_cast<const uint8_t*>(acts), blocks * static_cast<int64_t>(sizeof(ActBlockQ8)), n,
      blocks, static_cast<const uint8_t*>(w),
      blocks * static_cast<int64_t>(sizeof(quant::BlockQ4_0)), j_begin, j_end, out, ldo);
}

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(MatmulRowsQ4_0);
void matmul_rows_q4_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ4_0)(acts, n, k, w, j_begin, j_end, out, ldo);
}
}  // namespace infera::cpu
#endif
