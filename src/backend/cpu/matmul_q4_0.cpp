// Q4_0 weights x Q8 activations: a block's nibbles q in [0, 15] stand for q - 8, so
// sum((q - 8) * a) = sum(q * a) - 8 * sum(a): the nibbles go straight into the unsigned side of
// the byte dot product, which starts from the activation block's precomputed -8 * sums.
// Activations come in groups of 4 blocks (ActGroupQ4_0) so that AVX512-VNNI handles 4 weight
// blocks per instruction without shuffling nibbles.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_q4_0.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <vector>

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

#if INFERA_VNNI512
// Byte indices that gather 4 consecutive Q4_0 blocks (18 bytes each, 72 in all, spread over two
// 64-byte registers) into 64 nibble bytes: byte 16b + j = block b's qs[j], at 18b + 2 + j.
HWY_INLINE __m512i GatherNibbleIndex() {
  alignas(64) uint8_t idx[64];
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 16; ++j) idx[16 * b + j] = static_cast<uint8_t>(18 * b + 2 + j);
  return _mm512_load_si512(idx);
}
// How far ahead of the block in use the GEMV prefetches weights. Measured on a 151936 x 1024
// GEMV (thread CPU time, interleaved): x1.15 on one thread, level on two; 2 KiB the same.
constexpr int64_t kPrefetchBytes = 1024;

// Word indices that put block b's f16 scale (word 9b) into words 4b..4b+3.
HWY_INLINE __m512i GatherScaleIndex() {
  alignas(64) uint16_t idx[32] = {};
  for (int b = 0; b < 4; ++b)
    for (int l = 0; l < 4; ++l) idx[4 * b + l] = static_cast<uint16_t>(9 * b);
  return _mm512_load_si512(idx);
}
#endif

struct KernelQ4_0 {
  static constexpr int kAutoGemvStreams = 0;  // no Rows<S>: decode reads the row groups
  template <int NX>
  static HWY_INLINE void Row(const uint8_t* wrow, const uint8_t* acts, int64_t act_row_bytes,
                             int64_t blocks, float* out, int64_t ldo) {
    const auto* w = reinterpret_cast<const quant::BlockQ4_0*>(wrow);
    const ActGroupQ4_0* a[NX];
    for (int x = 0; x < NX; ++x)
      a[x] = reinterpret_cast<const ActGroupQ4_0*>(acts + x * act_row_bytes);
#if INFERA_INT8_SIMD
    int64_t b = 0;
    float sum[NX] = {};
#if INFERA_VNNI512
    // Four blocks per step in 512-bit registers: one two-register byte permute gathers their
    // nibbles, one word permute their scales; AND / shift split low and high nibbles, which the
    // activation layout (ActGroupQ4_0) matches; two vpdpbusd per activation row, starting from
    // the -8 offsets; one multiply-add by the 16 lanes' scales.
    {
      const __m512i nib_idx = GatherNibbleIndex(), scale_idx = GatherScaleIndex();
      const __m512i low4 = _mm512_set1_epi8(0x0F);
      // Blocks b..b+3 (activation group g) into acc.
      const auto step = [&](int64_t blk, int64_t g, __m512* acc) HWY_ATTR {
        const uint8_t* p = reinterpret_cast<const uint8_t*>(w + blk);
        // Decode streams the weights once: ask for them ahead of use (rows are contiguous, so
        // running past a row's end fetches the next row; a prefetch never faults).
        _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
        // The second register needs only bytes 64..71; the masked load never touches the rest
        // (which may lie past the end of the weights).
        const __m512i w0 = _mm512_loadu_si512(p);
        const __m512i w1 = _mm512_maskz_loadu_epi8(0xFFull, p + 64);
        const __m512i qs = _mm512_permutex2var_epi8(w0, nib_idx, w1);
        const __m512 dw =
            _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(scale_idx, w0)));
        const __m512i lo = _mm512_and_si512(qs, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), low4);
        for (int x = 0; x < NX; ++x) {
          const ActGroupQ4_0& ag = a[x][g];
          __m512i dot = _mm512_loadu_si512(ag.offset);
          dot = _mm512_dpbusd_epi32(dot, lo, _mm512_loadu_si512(ag.lo));
          dot = _mm512_dpbusd_epi32(dot, hi, _mm512_loadu_si512(ag.hi));
          acc[x] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                   _mm512_mul_ps(dw, _mm512_loadu_ps(ag.d)), acc[x]);
        }
      };
      // Two accumulators per activation row (even and odd groups) keep two chains in flight.
      __m512 acc0[NX], acc1[NX];
      for (int x = 0; x < NX; ++x) acc0[x] = acc1[x] = _mm512_setzero_ps();
      int64_t g = 0;
      for (; b + 8 <= blocks; b += 8, g += 2) {
        step(b, g, acc0);
        step(b + 4, g + 1, acc1);
      }
      if (b + 4 <= blocks) {
        step(b, g, acc0);
        b += 4;
      }
      for (int x = 0; x < NX; ++x) {
        const __m512 v = _mm512_add_ps(acc0[x], acc1[x]);
        sum[x] =
            HorizontalSum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
      }
    }
#endif
    // One block at a time (the tail above; every block on AVX2 / AVX-512 without VNNI).
    __m256 acc[NX];
    for (int x = 0; x < NX; ++x) acc[x] = _mm256_setzero_ps();
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (; b < blocks; ++b) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
      const __m256i q =
          _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), low4), _mm_and_si128(raw, low4));
      const float dw = HalfToFloat(w[b].d);
      const int64_t g = b / 4, i = b % 4;
      for (int x = 0; x < NX; ++x) {
        const ActGroupQ4_0& ag = a[x][g];
        const __m256i aq =
            _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ag.hi + 16 * i)),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(ag.lo + 16 * i)));
        const __m256i start = _mm256_setr_epi32(ag.offset[4 * i], 0, 0, 0, 0, 0, 0, 0);
        const __m256i p = DotU8S8(start, q, aq);  // sum((q - 8) * a) over the lanes
        acc[x] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ag.d[4 * i]), acc[x]);
      }
    }
    for (int x = 0; x < NX; ++x) out[x * ldo] = sum[x] + HorizontalSum(acc[x]);
#else
    for (int x = 0; x < NX; ++x) {
      float sum = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const ActGroupQ4_0& ag = a[x][b / 4];
        const int64_t i = b % 4;
        int32_t dot = 0;
        for (int j = 0; j < quant::kQk0 / 2; ++j) {
          dot += ((w[b].qs[j] & 0xF) - 8) * ag.lo[16 * i + j];
          dot += ((w[b].qs[j] >> 4) - 8) * ag.hi[16 * i + j];
        }
        sum += static_cast<float>(dot) * (HalfToFloat(w[b].d) * ag.d[4 * i]);
      }
      out[x * ldo] = sum;
    }
#endif
  }
};

void MatmulRowsQ4_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                    int64_t j_end, float* out, int64_t ldo) {
  const int64_t blocks = k / quant::kQk0;
  MatmulRowsQ<KernelQ4_0>(static_cast<const uint8_t*>(acts), activation_row_bytes(DType::Q4_0, k),
                          n, blocks, static_cast<const uint8_t*>(w),
                          blocks * static_cast<int64_t>(sizeof(quant::BlockQ4_0)), j_begin, j_end,
                          out, ldo);
}

#if INFERA_VNNI512
// One unit (8 blocks of 4 rows, weight_rowgroups.h) against NX activation rows into acc[x] (lane
// 4r + l: row r's partial sums). Per block: one 64-byte load, AND / shift into low and high
// nibbles of the 4 rows, and per activation row two vpdpbusd against 128-bit broadcasts of the
// activation block (ActGroupQ4_0 keeps a block's 16 low / 16 high bytes and its offset lane
// pattern contiguous), one convert and one multiply-add by row scale x activation scale.
struct GroupQ4_0 {
  using Act = ActGroupQ4_0;
  static constexpr int64_t kBytes = kUnitBytes;
  template <int NX>
  static HWY_INLINE void Unit(const uint8_t* p, const ActGroupQ4_0* const* a, int64_t u,
                              __m512* acc0, __m512* acc1) {
    const int64_t g0 = 2 * u;  // activation groups of 128: two per unit
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i sc = _mm512_loadu_si512(p);
    const __m512 s[2] = {_mm512_cvtph_ps(_mm512_castsi512_si256(sc)),
                         _mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1))};
    for (int b = 0; b < 8; ++b) {
      // Lane 4r + l takes row r's scale of block b (index 4 * (b % 4) + r of s[b / 4]).
      const __m512i idx =
          _mm512_add_epi32(_mm512_set1_epi32(4 * (b % 4)),
                           _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
      const __m512 dw = _mm512_permutexvar_ps(idx, s[b / 4]);
      const __m512i q = _mm512_loadu_si512(p + 64 + 64 * b);
      const __m512i lo = _mm512_and_si512(q, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      const int64_t g = g0 + b / 4, i = b % 4;
      for (int x = 0; x < NX; ++x) {
        const ActGroupQ4_0& ag = a[x][g];
        __m512i dot = _mm512_broadcast_i32x4(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(ag.offset + 4 * i)));
        dot = _mm512_dpbusd_epi32(dot, lo,
                                  _mm512_broadcast_i32x4(_mm_loadu_si128(
                                      reinterpret_cast<const __m128i*>(ag.lo + 16 * i))));
        dot = _mm512_dpbusd_epi32(dot, hi,
                                  _mm512_broadcast_i32x4(_mm_loadu_si128(
                                      reinterpret_cast<const __m128i*>(ag.hi + 16 * i))));
        __m512* acc = (b & 1) ? acc1 : acc0;
        acc[x] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(ag.d[4 * i])), acc[x]);
      }
    }
  }
};
#else
using GroupQ4_0 = void;  // restored rows through KernelQ4_0 only
#endif

void MatmulRowsQ4_0RowGroups(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                             int64_t j_end, float* out, int64_t ldo) {
  MatmulRowGroupsQ<GroupQ4_0, KernelQ4_0>(DType::Q4_0, acts, n, k, w, j_begin, j_end, out, ldo);
}

bool Q4_0RowGroupsNative() { return INFERA_VNNI512 != 0; }

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
HWY_EXPORT(MatmulRowsQ4_0RowGroups);
void matmul_rows_q4_0_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ4_0RowGroups)(acts, n, k, w, j_begin, j_end, out, ldo);
}
HWY_EXPORT(Q4_0RowGroupsNative);
bool q4_0_rowgroups_native() { return HWY_DYNAMIC_DISPATCH(Q4_0RowGroupsNative)(); }
}  // namespace infera::cpu
#endif
