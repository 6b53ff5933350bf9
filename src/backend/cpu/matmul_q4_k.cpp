// Q4_K weights x Q8K activations. Per super-block of 256 and sub-block s of 32:
//   w = d * sc[s] * q - dmin * m[s]  (q the 4-bit nibble)
//   sum(w * a) = d_a * (d * sum_s sc[s] * sum(q * a_s) - dmin * sum_s m[s] * sum(a_s))
// The first sum is integer byte products weighted by the 6-bit scales; the second uses the
// activation block's 16-element sums, so the mins cost one vpmaddwd per super-block.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_q4_k.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>
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

// The 12 packed bytes as 8 scale bytes and 8 min bytes (q4_k_scale_min for all j at once, on
// 32-bit words): j < 4 are the low six bits of bytes j (scales) and j + 4 (mins); j >= 4 take
// their low nibble from byte j + 4 and their top two bits from bits 6-7 of bytes j - 4 / j.
HWY_INLINE void UnpackScalesMins(const uint8_t* packed, uint8_t scales[8], uint8_t mins[8]) {
  uint32_t w[3];
  std::memcpy(w, packed, 12);
  const uint32_t sc[2] = {w[0] & 0x3F3F3F3Fu,
                          (w[2] & 0x0F0F0F0Fu) | (((w[0] >> 6) & 0x03030303u) << 4)};
  const uint32_t mn[2] = {w[1] & 0x3F3F3F3Fu,
                          ((w[2] >> 4) & 0x0F0F0F0Fu) | (((w[1] >> 6) & 0x03030303u) << 4)};
  std::memcpy(scales, sc, 8);
  std::memcpy(mins, mn, 8);
}

struct KernelQ4_K {
  static constexpr int kAutoGemvStreams = 0;  // no Rows<S>: decode reads the row groups
  template <int NX>
  static HWY_INLINE void Row(const uint8_t* wrow, const uint8_t* acts, int64_t act_row_bytes,
                             int64_t blocks, float* out, int64_t ldo) {
    const auto* w = reinterpret_cast<const quant::BlockQ4_K*>(wrow);
    const ActBlockQ8K* a[NX];
    for (int x = 0; x < NX; ++x)
      a[x] = reinterpret_cast<const ActBlockQ8K*>(acts + x * act_row_bytes);
#if INFERA_INT8_SIMD
      // Per sub-block: vpmaddubsw (nibble x activation pairs, at most 2 * 15 * 127) then vpmaddwd
      // by the 6-bit scale, which applies the scale and widens to int32 in one step; the mins meet
      // the activation group sums in one more vpmaddwd. Everything stays in vectors until the end.
#if INFERA_VNNI512
    // 512-bit: one 64-byte load holds chunks c and c + 1; AND / shift and one 128-bit-lane
    // shuffle each give [sub-block 2c | 2c + 1], the order of 64 activation bytes. vpmaddubsw
    // then vpdpwssd by [sc[2c] x 16 | sc[2c + 1] x 16] (one word permute of the 8 scales).
    __m512 acc[NX];
    __m256 acc_min[NX];
    for (int x = 0; x < NX; ++x) {
      acc[x] = _mm512_setzero_ps();
      acc_min[x] = _mm256_setzero_ps();
    }
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i scale_idx[4];
    for (int c = 0; c < 4; ++c)
      scale_idx[c] =
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(2 * c))),
                             _mm256_set1_epi16(static_cast<int16_t>(2 * c + 1)), 1);
    for (int64_t b = 0; b < blocks; ++b) {
      const quant::BlockQ4_K& blk = w[b];
      uint8_t sc[8], mn[8];
      UnpackScalesMins(blk.scales, sc, mn);
      const float d = HalfToFloat(blk.d), dmin = HalfToFloat(blk.dmin);
      const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)));
      const __m256i mins16 =
          _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8));
      const __m512i sc16 = _mm512_castsi128_si512(
          _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
      __m512i q[4], scale16[4];
      for (int h = 0; h < 2; ++h) {
        const __m512i raw = _mm512_loadu_si512(blk.qs + 64 * h);
        const __m512i lo = _mm512_and_si512(raw, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        q[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);      // [chunk 2h low | chunk 2h high]
        q[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);  // the same for chunk 2h + 1
      }
      for (int c = 0; c < 4; ++c) scale16[c] = _mm512_permutexvar_epi16(scale_idx[c], sc16);
      for (int x = 0; x < NX; ++x) {
        const ActBlockQ8K& ab = a[x][b];
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
          const __m512i aq = _mm512_loadu_si512(ab.qs + 64 * c);
          sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[c], aq), scale16[c]);
        }
        acc[x] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(d * ab.d), acc[x]);
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
        acc_min[x] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins16)),
                                     _mm256_set1_ps(dmin * ab.d), acc_min[x]);
      }
    }
    for (int x = 0; x < NX; ++x) {
      const __m256 a8 =
          _mm256_add_ps(_mm512_castps512_ps256(acc[x]), _mm512_extractf32x8_ps(acc[x], 1));
      out[x * ldo] = HorizontalSum(a8) - HorizontalSum(acc_min[x]);
    }
#else
    __m256 acc[NX], acc_min[NX];
    for (int x = 0; x < NX; ++x) acc[x] = acc_min[x] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < blocks; ++b) {
      const quant::BlockQ4_K& blk = w[b];
      uint8_t sc[8], mn[8];
      UnpackScalesMins(blk.scales, sc, mn);
      const float d = HalfToFloat(blk.d), dmin = HalfToFloat(blk.dmin);
      // mins as int16 [m0, m0, m1, m1, ...]: vpmaddwd with the 16 group sums gives m[s] * sum(a_s).
      const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)));
      const __m256i mins16 =
          _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8));
      __m256i q[8], scale16[8];
      for (int c = 0; c < 4; ++c) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
        q[2 * c] = _mm256_and_si256(raw, low4);
        q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      }
      for (int s = 0; s < 8; ++s) scale16[s] = _mm256_set1_epi16(sc[s]);
      for (int x = 0; x < NX; ++x) {
        const ActBlockQ8K& ab = a[x][b];
        __m256i sumi = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * s));
          sumi = MaddAdd16(sumi, _mm256_maddubs_epi16(q[s], aq), scale16[s]);
        }
        acc[x] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d * ab.d), acc[x]);
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
        acc_min[x] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins16)),
                                     _mm256_set1_ps(dmin * ab.d), acc_min[x]);
      }
    }
    for (int x = 0; x < NX; ++x) out[x * ldo] = HorizontalSum(acc[x]) - HorizontalSum(acc_min[x]);
#endif
#else
    for (int x = 0; x < NX; ++x) {
      float sum = 0.0f, mins = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const quant::BlockQ4_K& blk = w[b];
        int32_t sumi = 0, msum = 0;
        for (int s = 0; s < 8; ++s) {
          uint8_t sc, m;
          quant::q4_k_scale_min(s, blk.scales, sc, m);
          const uint8_t* qs = blk.qs + 32 * (s / 2);
          const int shift = 4 * (s % 2);
          int32_t dot = 0;
          for (int l = 0; l < 32; ++l) dot += ((qs[l] >> shift) & 0xF) * a[x][b].qs[32 * s + l];
          sumi += sc * dot;
          msum += m * (a[x][b].bsums[2 * s] + a[x][b].bsums[2 * s + 1]);
        }
        sum += static_cast<float>(sumi) * (HalfToFloat(blk.d) * a[x][b].d);
        mins += static_cast<float>(msum) * (HalfToFloat(blk.dmin) * a[x][b].d);
      }
      out[x * ldo] = sum - mins;
    }
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

#if INFERA_VNNI512
// One unit (a super-block of 4 rows, weight_rowgroups.h) against NX activation rows into acc[x]
// (lane 4r + l: row r's partial sums). Each 64-byte line holds, in 128-bit lane r, 4 bytes of each
// of row r's four qs chunks (dword l from chunk l), so after the AND / shift every dword lane
// 4r + l belongs to one sub-block: 2l in the low nibbles, 2l + 1 in the high ones. The 8 lines'
// vpdpbusd products therefore add up in two int32 accumulators whose lane 4r + l is the whole
// integer dot of row r's sub-block 2l (2l + 1), and the 6-bit scales are applied once a unit, by
// one convert and one multiply-add each: no per-sub-block scale permute, convert or multiply-add
// (the previous layout's 24 of ~85 vector operations a unit; the kernel is bound by its vector
// operations in the VM's fast memory windows). The activation bytes come permuted to match
// (PermuteActs: 16 bytes of each line's broadcast = 4 elements of each of the 4 sub-blocks). The
// mins: one vpdpwssd of [m[r][s]] with the activation sub-block sums.
struct GroupQ4_K {
  using Act = ActBlockQ8K;
  static constexpr int64_t kBytes = kUnitBytes;
  // out = in with each block's qs reordered for Unit: dword 8j + 4h + l of the block takes qs
  // dword 16l + 8h + j (elements 64l + 32h + 4j + [0, 4): sub-block 2l + h), for line j's low
  // (h = 0) and high (h = 1) nibbles; d and bsums unchanged. The same bytes, another order.
  static HWY_INLINE void PermuteActs(const ActBlockQ8K* in, int64_t blocks, ActBlockQ8K* out) {
    // Output vector m (dwords 16m + i, i = 8(j - 2m) + 4h + l) from inputs l (dwords 8h + j):
    // l = 0, 1 from the first two input vectors, l = 2, 3 from the last two (the same offsets
    // into either pair: (l % 2) * 16 + 8h + j), then a blend.
    alignas(64) int32_t idx[4][16];
    for (int m = 0; m < 4; ++m)
      for (int i = 0; i < 16; ++i) {
        const int j = 2 * m + i / 8, h = (i / 4) % 2, l = i % 4;
        idx[m][i] = (l % 2) * 16 + 8 * h + j;
      }
    const __mmask16 high_l = 0xCCCC;  // lanes with l >= 2
    for (int64_t b = 0; b < blocks; ++b) {
      out[b].d = in[b].d;
      std::memcpy(out[b].bsums, in[b].bsums, sizeof(in[b].bsums));
      __m512i v[4];
      for (int l = 0; l < 4; ++l) v[l] = _mm512_loadu_si512(in[b].qs + 64 * l);
      for (int m = 0; m < 4; ++m) {
        const __m512i at = _mm512_load_si512(idx[m]);
        const __m512i from01 = _mm512_permutex2var_epi32(v[0], at, v[1]);
        const __m512i from23 = _mm512_permutex2var_epi32(v[2], at, v[3]);
        _mm512_storeu_si512(out[b].qs + 64 * m, _mm512_mask_blend_epi32(high_l, from01, from23));
      }
    }
  }
  template <int NX>
  static HWY_INLINE void Unit(const uint8_t* p, const ActBlockQ8K* const* a, int64_t u, __m512* acc,
                              __m512* /*acc1: one chain per row suffices here*/) {
    const __m512i row_of_lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512 dd = _mm512_castps256_ps512(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    const __m512 d = _mm512_permutexvar_ps(row_of_lane, dd);  // lane 4r + l: d of row r
    const __m512 neg_dmin = _mm512_sub_ps(
        _mm512_setzero_ps(),
        _mm512_permutexvar_ps(_mm512_add_epi32(row_of_lane, _mm512_set1_epi32(4)), dd));
    // Word w of the 4 rows' packed scales (UnpackScalesMins, 4 rows at a time).
    const __m128i w0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    const __m128i w1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
    const __m128i w2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 48));
    const __m128i m6 = _mm_set1_epi8(0x3F), m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x03);
    const __m128i sc_lo = _mm_and_si128(w0, m6);  // byte 4r + s: scale s of row r (s < 4)
    const __m128i sc_hi = _mm_or_si128(_mm_and_si128(w2, m4),
                                       _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w0, 6), m2), 4));
    const __m128i mn_lo = _mm_and_si128(w1, m6);
    const __m128i mn_hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(w2, 4), m4),
                                       _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w1, 6), m2), 4));
    // Byte 4r + l: the scale of sub-block 2l (even) / 2l + 1 (odd) of row r. Each row's (s0, s2)
    // and (s1, s3) pairs of sc_lo (and s4..s7 of sc_hi) as words, then interleaved by words.
    const __m128i pairs = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m128i lo_pairs = _mm_shuffle_epi8(sc_lo, pairs);
    const __m128i hi_pairs = _mm_shuffle_epi8(sc_hi, pairs);
    const __m128i sc_even = _mm_unpacklo_epi16(lo_pairs, hi_pairs);
    const __m128i sc_odd = _mm_unpackhi_epi16(lo_pairs, hi_pairs);
    const __m512 scale_even = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc_even)), d);
    const __m512 scale_odd = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc_odd)), d);
    // Mins as int16, entry 8r + s.
    const __m512i mins16 = _mm512_cvtepu8_epi16(
        _mm256_set_m128i(_mm_unpackhi_epi32(mn_lo, mn_hi), _mm_unpacklo_epi32(mn_lo, mn_hi)));
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i even[NX], odd[NX];
    for (int x = 0; x < NX; ++x) even[x] = odd[x] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const __m512i q = _mm512_loadu_si512(p + 64 + 64 * j);
      const __m512i lo = _mm512_and_si512(q, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      for (int x = 0; x < NX; ++x) {
        const int8_t* aq = a[x][u].qs + 32 * j;
        even[x] = _mm512_dpbusd_epi32(
            even[x], lo,
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq))));
        odd[x] = _mm512_dpbusd_epi32(
            odd[x], hi,
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq + 16))));
      }
    }
    for (int x = 0; x < NX; ++x) {
      const ActBlockQ8K& ab = a[x][u];
      const __m128i sums = _mm_hadd_epi16(  // sub-block sums of the activations, s = 0..7
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums)),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums + 8)));
      const __m512i msum =
          _mm512_dpwssd_epi32(_mm512_setzero_si512(), mins16, _mm512_broadcast_i32x4(sums));
      __m512 part = _mm512_mul_ps(_mm512_cvtepi32_ps(msum), neg_dmin);
      part = _mm512_fmadd_ps(_mm512_cvtepi32_ps(even[x]), scale_even, part);
      part = _mm512_fmadd_ps(_mm512_cvtepi32_ps(odd[x]), scale_odd, part);
      acc[x] = _mm512_fmadd_ps(part, _mm512_set1_ps(ab.d), acc[x]);
    }
  }
};
#else
using GroupQ4_K = void;  // restored rows through KernelQ4_K only
#endif

void MatmulRowsQ4_KRowGroups(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                             int64_t j_end, float* out, int64_t ldo) {
  MatmulRowGroupsQ<GroupQ4_K, KernelQ4_K>(DType::Q4_K, acts, n, k, w, j_begin, j_end, out, ldo);
}

bool Q4_KRowGroupsNative() { return INFERA_VNNI512 != 0; }

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
HWY_EXPORT(MatmulRowsQ4_KRowGroups);
void matmul_rows_q4_k_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ4_KRowGroups)(acts, n, k, w, j_begin, j_end, out, ldo);
}
HWY_EXPORT(Q4_KRowGroupsNative);
bool q4_k_rowgroups_native() { return HWY_DYNAMIC_DISPATCH(Q4_KRowGroupsNative)(); }
}  // namespace infera::cpu
#endif
