// Q8_0 weights x Q8 activations: per 32-element block, sum(w * a) in integers, times d_w * d_a.
// vpdpbusd wants one unsigned operand: |w| as the unsigned side and a with w's sign as the
// signed side give the same products (|w| <= 128, so vpmaddubsw cannot saturate either).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_q8_0.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/int8_dot-inl.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
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

#if INFERA_VNNI512
// One unit (8 blocks of 4 rows, weight_rowgroups.h) against NX activation rows into acc0 / acc1
// (lane 4r + l: row r's partial sums; even blocks into acc0, odd into acc1). vpdpbusd takes the
// unsigned operand from the weights: their bytes XOR 0x80 are w + 128 in [0, 255] (every int8,
// -128 included), and the activation block's offset (-128 * its lane sums, ActBlockQ8) takes the
// +128 back out, so the int32 lanes are exact. Per block: two 64-byte loads (16 elements of each
// of the 4 rows apiece), two XOR, per activation row two vpdpbusd against 128-bit broadcasts of
// the activation halves, one convert and one multiply-add by row scale x activation scale — the
// file layout's 256-bit kernel needs about four times the instructions per byte (a sign pair, a
// dot, a convert, a scalar f16 convert and broadcast per 32 bytes of one row).
struct GroupQ8_0 {
  using Act = ActBlockQ8;
  static constexpr int64_t kBytes = kUnitBytesQ8_0;
  template <int NX>
  static HWY_INLINE void Unit(const uint8_t* p, const ActBlockQ8* const* a, int64_t u, __m512* acc0,
                              __m512* acc1) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i sc = _mm512_loadu_si512(p);
    const __m512 s[2] = {_mm512_cvtph_ps(_mm512_castsi512_si256(sc)),
                         _mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1))};
    for (int b = 0; b < 8; ++b) {
      // Lane 4r + l takes row r's scale of block b (index 4 * (b % 4) + r of s[b / 4]).
      const __m512i idx =
          _mm512_add_epi32(_mm512_set1_epi32(4 * (b % 4)),
                           _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
      const __m512 dw = _mm512_permutexvar_ps(idx, s[b / 4]);
      const __m512i lo = _mm512_xor_si512(_mm512_loadu_si512(p + 64 + 128 * b), flip);
      const __m512i hi = _mm512_xor_si512(_mm512_loadu_si512(p + 128 + 128 * b), flip);
      for (int x = 0; x < NX; ++x) {
        const ActBlockQ8& ab = a[x][8 * u + b];
        __m512i dot =
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.offset)));
        dot = _mm512_dpbusd_epi32(
            dot, lo,
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs))));
        dot = _mm512_dpbusd_epi32(
            dot, hi,
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs + 16))));
        __m512* acc = (b & 1) ? acc1 : acc0;
        acc[x] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(ab.d)),
                                 acc[x]);
      }
    }
  }
};
#else
using GroupQ8_0 = void;  // restored rows through KernelQ8_0 only
#endif

void MatmulRowsQ8_0RowGroups(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                             int64_t j_end, float* out, int64_t ldo) {
  MatmulRowGroupsQ<GroupQ8_0, KernelQ8_0>(DType::Q8_0, acts, n, k, w, j_begin, j_end, out, ldo);
}

bool Q8_0RowGroupsNative() { return INFERA_VNNI512 != 0; }

const char* QuantTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(MatmulRowsQ8_0);
HWY_EXPORT(QuantTargetName);
HWY_EXPORT(MatmulRowsQ8_0RowGroups);
void matmul_rows_q8_0_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ8_0RowGroups)(acts, n, k, w, j_begin, j_end, out, ldo);
}
HWY_EXPORT(Q8_0RowGroupsNative);
bool q8_0_rowgroups_native() { return HWY_DYNAMIC_DISPATCH(Q8_0RowGroupsNative)(); }
const char* quant_kernel_target_name() { return HWY_DYNAMIC_DISPATCH(QuantTargetName)(); }
void matmul_rows_q8_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ8_0)(acts, n, k, w, j_begin, j_end, out, ldo);
}
}  // namespace infera::cpu
#endif
