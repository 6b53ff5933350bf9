// Q8_0 weights x Q8 activations: per 32-element block, sum(w * a) in integers, times d_w * d_a.
// vpdpbusd wants one unsigned operand: |w| as the unsigned side and a with w's sign as the
// signed side give the same products (|w| <= 128, so vpmaddubsw cannot saturate either).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_q8_0.cpp"
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

struct KernelQ8_0 {
  // Has Rows<S> (int8_dot-inl.h, MatmulRowsQ); 4 streams when the setting is auto (measured).
  static constexpr int kAutoGemvStreams = 4;
  template <int NX>
  static HWY_INLINE void Row(const uint8_t* wrow, const uint8_t* acts, int64_t act_row_bytes,
                             int64_t blocks, float* out, int64_t ldo) {
    const auto* w = reinterpret_cast<const quant::BlockQ8_0*>(wrow);
    const ActBlockQ8* a[NX];
    for (int x = 0; x < NX; ++x)
      a[x] = reinterpret_cast<const ActBlockQ8*>(acts + x * act_row_bytes);
#if INFERA_INT8_SIMD
    // Two accumulators per row (even and odd blocks) keep two FMA chains in flight.
    __m256 acc[NX][2];
    for (int x = 0; x < NX; ++x) acc[x][0] = acc[x][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
      const __m256i wabs = _mm256_sign_epi8(wq, wq);
      const float dw = HalfToFloat(w[b].d);
      for (int x = 0; x < NX; ++x) Block(wq, wabs, dw, a[x][b], acc[x][b & 1]);
    }
    for (int x = 0; x < NX; ++x) out[x * ldo] = HorizontalSum(_mm256_add_ps(acc[x][0], acc[x][1]));
#else
    for (int x = 0; x < NX; ++x) {
      float sum = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t dot = 0;
        for (int i = 0; i < quant::kQk0; ++i) dot += int32_t{w[b].qs[i]} * a[x][b].qs[i];
        sum += static_cast<float>(dot) * (HalfToFloat(w[b].d) * a[x][b].d);
      }
      out[x * ldo] = sum;
    }
#endif
  }

  // S weight rows against one activation row, block b of every row per step (S streams in
  // flight); each row's operations and order are Row<1>'s.
  template <int S>
  static HWY_INLINE void Rows(const uint8_t* const* wrows, const uint8_t* acts, int64_t blocks,
                              float* const* outs) {
#if INFERA_INT8_SIMD
    const auto* a = reinterpret_cast<const ActBlockQ8*>(acts);
    const quant::BlockQ8_0* w[S];
    __m256 acc[S][2];
    for (int s = 0; s < S; ++s) {
      w[s] = reinterpret_cast<const quant::BlockQ8_0*>(wrows[s]);
      acc[s][0] = acc[s][1] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < blocks; ++b)
#pragma GCC unroll 8  // every stream in registers (a loop over s spills the accumulators)
      for (int s = 0; s < S; ++s) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[s][b].qs));
        Block(wq, _mm256_sign_epi8(wq, wq), HalfToFloat(w[s][b].d), a[b], acc[s][b & 1]);
      }
    for (int s = 0; s < S; ++s) *outs[s] = HorizontalSum(_mm256_add_ps(acc[s][0], acc[s][1]));
#else
    for (int s = 0; s < S; ++s) Row<1>(wrows[s], acts, 0, blocks, outs[s], 0);
#endif
  }

#if INFERA_INT8_SIMD
  // One weight block (wq, |wq|, its scale) against one activation block into acc.
  static HWY_INLINE void Block(__m256i wq, __m256i wabs, float dw, const ActBlockQ8& ab,
                               __m256& acc) {
    const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
    const __m256i p = DotU8S8(_mm256_setzero_si256(), wabs, _mm256_sign_epi8(aq, wq));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ab.d), acc);
  }
#endif
};

void MatmulRowsQ8_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                    int64_t j_end, float* out, int64_t ldo) {
  const int64_t blocks = k / quant::kQk0;
  MatmulRowsQ<KernelQ8_0>(
      static_cast<const uint8_t*>(acts), blocks * static_cast<int64_t>(sizeof(ActBlockQ8)), n,
      blocks, static_cast<const uint8_t*>(w),
      blocks * static_cast<int64_t>(sizeof(quant::BlockQ8_0)), j_begin, j_end, out, ldo);
}

const char* QuantTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(MatmulRowsQ8_0);
HWY_EXPORT(QuantTargetName);
const char* quant_kernel_target_name() { return HWY_DYNAMIC_DISPATCH(QuantTargetName)(); }
void matmul_rows_q8_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ8_0)(acts, n, k, w, j_begin, j_end, out, ldo);
}
}  // namespace infera::cpu
#endif
