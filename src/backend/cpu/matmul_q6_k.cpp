// Q6_K weights x Q8K activations. Per super-block of 256 and group g of 16:
//   w = d * sc[g] * (q - 32)  (q the 6-bit value, sc int8)
//   sum(w * a) = d * d_a * (sum_g sc[g] * sum(q * a_g) - 32 * sum_g sc[g] * sum(a_g))
// q in [0, 63] is the unsigned side of the byte products; the -32 offset comes from the
// activation block's 16-element sums. A 32-byte chunk covers two groups.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_q6_k.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

// The shared drivers (int8_dot-inl.h) inline this file's kernels, so they take GFNI here too.
#if HWY_TARGET == HWY_AVX3_DL && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("gfni")
#endif
#include "backend/cpu/int8_dot-inl.h"
#if HWY_TARGET == HWY_AVX3_DL && defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
#include "quant/block_formats.h"

HWY_BEFORE_NAMESPACE();
// GFNI too (the 6-bit unpack's vgf2p8affineqb): the AVX3_DL functions of this file run only where
// the CPU has it (MatmulRowsQ6_K falls back to the AVX3 target's code otherwise, see
// q6_k_avx3_dl_usable()), so GCC may use it anywhere in them.
#if HWY_TARGET == HWY_AVX3_DL && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni,gfni")
#endif
namespace infera::cpu {
namespace HWY_NAMESPACE {

// kGfni (512-bit VNNI path only): the high bits of each 6-bit value are moved into place by one
// GF(2) affine byte transform per vector (vgf2p8affineqb, clean bits 4..5) instead of a variable
// word shift and an AND: 5 instead of 7 vector ops per half super-block. Bit for bit the shift
// form (the same integers reach the same multiplies).
template <bool kGfni>
struct KernelQ6_KImpl {
  // Has Rows<S> (int8_dot-inl.h, MatmulRowsQ); 4 streams when the setting is auto. On earlier
  // sessions' hosts (with AVX-VNNI) 2 measured ahead of 4 (cpuq note); on the AMD Zen 4 VM 4 is
  // ahead of 2 (x1.17-1.32 at one thread, whole-model q4_k_m decode x1.10 per CPU second; the cpuq8
  // note), and S = 4 keeps every stream in registers since the unroll pragma (S = 8 spills).
  static constexpr int kAutoGemvStreams = 4;
  template <int NX>
  static HWY_INLINE void Row(const uint8_t* wrow, const uint8_t* acts, int64_t act_row_bytes,
                             int64_t blocks, float* out, int64_t ldo) {
    const auto* w = reinterpret_cast<const quant::BlockQ6_K*>(wrow);
    const ActBlockQ8K* a[NX];
    for (int x = 0; x < NX; ++x)
      a[x] = reinterpret_cast<const ActBlockQ8K*>(acts + x * act_row_bytes);
#if INFERA_INT8_SIMD
      // Per 32-byte chunk: vpmaddubsw (6-bit q x activation pairs, at most 2 * 63 * 127) then
      // vpmaddwd by the chunk's two group scales (int16 lanes 0-7 and 8-15 hold the pairs of
      // elements 0-15 and 16-31). The -32 offset is sum_g sc[g] * sum(a_g): one vpmaddwd of the
      // scales with the activation group sums.
#if INFERA_VNNI512
    // 512-bit: per half of 128, one 64-byte load of ql gives groups [0 | 1] (AND) and [2 | 3]
    // (shift, AND); qh broadcast to both halves and shifted per half (vpsrlvw) gives their high
    // bits. Each vector is 64 consecutive elements, the order of the activation bytes. Scales:
    // one word permute per vector of the 16 widened scales, applied by vpdpwssd.
    __m512 acc[NX];
    for (int x = 0; x < NX; ++x) acc[x] = _mm512_setzero_ps();
    const Consts512 c = MakeConsts512();
    for (int64_t b = 0; b < blocks; ++b) Block512<NX>(c, w[b], a, b, acc);
    for (int x = 0; x < NX; ++x)
      out[x * ldo] = HorizontalSum(
          _mm256_add_ps(_mm512_castps512_ps256(acc[x]), _mm512_extractf32x8_ps(acc[x], 1)));
#else
    __m256 acc[NX];
    for (int x = 0; x < NX; ++x) acc[x] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(0x03);
    for (int64_t b = 0; b < blocks; ++b) {
      const quant::BlockQ6_K& blk = w[b];
      const float d = HalfToFloat(blk.d);
      const __m256i sc16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      __m256i q[8], scales[8];
      for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = blk.ql + 64 * half;
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * half));
        const __m256i lows[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                                 _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                 _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
        for (int g = 0; g < 4; ++g) {
          const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), low2);
          q[4 * half + g] = _mm256_or_si256(lows[g], _mm256_slli_epi16(high, 4));
          const int group = 8 * half + 2 * g;
#if HWY_TARGET == HWY_AVX3_DL  // one word permute of the 16 widened scales
          scales[4 * half + g] = _mm256_permutexvar_epi16(
              _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(group + 1)),
                               _mm_set1_epi16(static_cast<int16_t>(group))),
              sc16);
#else
          scales[4 * half + g] = _mm256_set_m128i(_mm_set1_epi16(blk.scales[group + 1]),
                                                  _mm_set1_epi16(blk.scales[group]));
#endif
        }
      }
      for (int x = 0; x < NX; ++x) {
        const ActBlockQ8K& ab = a[x][b];
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
          const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * c));
          sumi = MaddAdd16(sumi, _mm256_maddubs_epi16(q[c], aq), scales[c]);
        }
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
        acc[x] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d * ab.d), acc[x]);
      }
    }
    for (int x = 0; x < NX; ++x) out[x * ldo] = HorizontalSum(acc[x]);
#endif
#else
    for (int x = 0; x < NX; ++x) {
      float sum = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const quant::BlockQ6_K& blk = w[b];
        int32_t sumi = 0;
        for (int half = 0; half < 2; ++half) {
          const uint8_t* ql = blk.ql + 64 * half;
          const uint8_t* qh = blk.qh + 32 * half;
          for (int g = 0; g < 4; ++g) {
            for (int l = 0; l < 32; ++l) {
              const int low = (ql[l + 32 * (g & 1)] >> (4 * (g >> 1))) & 0xF;
              const int q = (low | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
              sumi +=
                  blk.scales[8 * half + 2 * g + l / 16] * q * a[x][b].qs[128 * half + 32 * g + l];
            }
          }
        }
        sum += static_cast<float>(sumi) * (HalfToFloat(blk.d) * a[x][b].d);
      }
      out[x * ldo] = sum;
    }
#endif
  }
  // S weight rows against one activation row, super-block b of every row per step (S streams in
  // flight); each row's operations and order are Row<1>'s. The 512-bit VNNI path only: elsewhere
  // the rows run one after the other.
  template <int S>
  static HWY_INLINE void Rows(const uint8_t* const* wrows, const uint8_t* acts, int64_t blocks,
                              float* const* outs) {
#if INFERA_VNNI512
    const ActBlockQ8K* a[1] = {reinterpret_cast<const ActBlockQ8K*>(acts)};
    const quant::BlockQ6_K* w[S];
    __m512 acc[S];
    for (int s = 0; s < S; ++s) {
      w[s] = reinterpret_cast<const quant::BlockQ6_K*>(wrows[s]);
      acc[s] = _mm512_setzero_ps();
    }
    const Consts512 c = MakeConsts512();
    for (int64_t b = 0; b < blocks; ++b)
#pragma GCC unroll 8  // every stream in registers (a loop over s spills the accumulators)
      for (int s = 0; s < S; ++s) Block512<1>(c, w[s][b], a, b, &acc[s]);
    for (int s = 0; s < S; ++s)
      *outs[s] = HorizontalSum(
          _mm256_add_ps(_mm512_castps512_ps256(acc[s]), _mm512_extractf32x8_ps(acc[s], 1)));
#else
    for (int s = 0; s < S; ++s) Row<1>(wrows[s], acts, 0, blocks, outs[s], 0);
#endif
  }

#if INFERA_VNNI512
  struct Consts512 {
    __m512i low4, bits45, shl01, shr23;
    __m512i scale_idx[4];  // vector v covers groups of 16 numbered 4v .. 4v + 3
  };
  // The vgf2p8affineqb matrix (one per 64-bit lane) that maps bits 2g, 2g + 1 of every byte to
  // bits 4, 5 and clears the others: row i of the matrix (the byte 7 - i of the qword) selects the
  // input bits that output bit i is the parity of.
  static constexpr int64_t GfHighBits(int g) {
    return static_cast<int64_t>((uint64_t{1} << (2 * g)) << 24 | (uint64_t{1} << (2 * g + 1))
                                                                     << 16);
  }
  static HWY_INLINE Consts512 MakeConsts512() {
    Consts512 c;
    c.low4 = _mm512_set1_epi8(0x0F);
    c.bits45 = _mm512_set1_epi8(0x30);
    if constexpr (kGfni) {
      // Low 256 bits: g = 0 (g = 2 for the high nibbles), high 256 bits: g = 1 (g = 3).
      c.shl01 = _mm512_inserti64x4(_mm512_set1_epi64(GfHighBits(0)),
                                   _mm256_set1_epi64x(GfHighBits(1)), 1);
      c.shr23 = _mm512_inserti64x4(_mm512_set1_epi64(GfHighBits(2)),
                                   _mm256_set1_epi64x(GfHighBits(3)), 1);
    } else {
      // Word shifts that move qh bits 2g, 2g + 1 of every byte to bits 4, 5 (g = 0, 1 left by 4,
      // 2; g = 2, 3 right by 0, 2); within a 16-bit word the high byte's bits move as the low's.
      c.shl01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
      c.shr23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    }
    for (int v = 0; v < 4; ++v) {
      alignas(64) int16_t idx[32];
      for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(4 * v + l / 8);
      c.scale_idx[v] = _mm512_load_si512(idx);
    }
    return c;
  }
  // One super-block of a weight row against block b of NX activation rows, into acc[x].
  template <int NX>
  static HWY_INLINE void Block512(const Consts512& c, const quant::BlockQ6_K& blk,
                                  const ActBlockQ8K* const* a, int64_t b, __m512* acc) {
    const float d = HalfToFloat(blk.d);
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    const __m512i sc16z = _mm512_castsi256_si512(sc16);
    __m512i q[4], scales[4];
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * half);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * half)));
      // The high bits straight into bits 4, 5 (one GF(2) affine transform, or one shift and one
      // AND, each), then q = (low nibble AND 0x0F) OR high in one vpternlogd (0xEC: (A & C) | B).
      __m512i h01, h23;
      if constexpr (kGfni) {
        h01 = _mm512_gf2p8affine_epi64_epi8(qh, c.shl01, 0);
        h23 = _mm512_gf2p8affine_epi64_epi8(qh, c.shr23, 0);
      } else {
        h01 = _mm512_and_si512(_mm512_sllv_epi16(qh, c.shl01), c.bits45);
        h23 = _mm512_and_si512(_mm512_srlv_epi16(qh, c.shr23), c.bits45);
      }
      q[2 * half] = _mm512_ternarylogic_epi32(ql, h01, c.low4, 0xEC);
      q[2 * half + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), h23, c.low4, 0xEC);
    }
    for (int v = 0; v < 4; ++v) scales[v] = _mm512_permutexvar_epi16(c.scale_idx[v], sc16z);
    for (int x = 0; x < NX; ++x) {
      const ActBlockQ8K& ab = a[x][b];
      // Two chains of two vpdpwssd (vectors 0, 1 and 2, 3) instead of one of four: half the
      // dependent latency per super-block; int32 sums, so the same value in any order.
      __m512i part[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i a0 = _mm512_loadu_si512(ab.qs + 128 * h);
        const __m512i a1 = _mm512_loadu_si512(ab.qs + 128 * h + 64);
        part[h] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_maddubs_epi16(q[2 * h], a0),
                                      scales[2 * h]);
        part[h] =
            _mm512_dpwssd_epi32(part[h], _mm512_maddubs_epi16(q[2 * h + 1], a1), scales[2 * h + 1]);
      }
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
      const __m512i sumi = _mm512_sub_epi32(_mm512_add_epi32(part[0], part[1]),
                                            _mm512_zextsi256_si512(offset));  // -32 sum_g sc a_g
      acc[x] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(d * ab.d), acc[x]);
    }
  }
#endif
};

using KernelQ6_K = KernelQ6_KImpl<false>;

void MatmulRowsQ6_K(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                    int64_t j_end, float* out, int64_t ldo) {
  const int64_t blocks = k / quant::kQkK;
  const auto run = [&](auto kernel) {
    MatmulRowsQ<decltype(kernel)>(
        static_cast<const uint8_t*>(acts), blocks * static_cast<int64_t>(sizeof(ActBlockQ8K)), n,
        blocks, static_cast<const uint8_t*>(w),
        blocks * static_cast<int64_t>(sizeof(quant::BlockQ6_K)), j_begin, j_end, out, ldo);
  };
#if INFERA_VNNI512
  if (q6_k_gfni_unpack()) return run(KernelQ6_KImpl<true>{});
#endif
  run(KernelQ6_K{});
}

#if INFERA_VNNI512
// One unit (a super-block of 4 rows, weight_rowgroups.h) against NX activation rows. A 64-byte
// line holds 16 bytes of each of the 4 rows, so every vector below is one 16-element group (one
// scale) of each row: per group one vpmaddubsw of the 6-bit values with a 128-bit broadcast of
// the activation group, one vpdpwssd by the 4 rows' scales (word lanes 8r..8r+7 = sc[r][G], one
// word permute), int32 lanes 4r..4r+3 = row r. The -32 offset: sum_G sc[r][G] * bsums[G] by two
// vpmaddwd over the widened scales, folded into the same lanes; then one convert and one
// multiply-add by d[r] * d_a.
struct GroupQ6_K {
  using Act = ActBlockQ8K;
  static constexpr int64_t kBytes = kUnitBytesQ6_K;
  template <int NX>
  static HWY_INLINE void Unit(const uint8_t* p, const ActBlockQ8K* const* a, int64_t u,
                              __m512* acc0, __m512* acc1) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    // Scales widened to int16: rows 0, 1 (words 16r + G) and rows 2, 3.
    const __m512i sc01 =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i sc23 =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    // Word 8r + i -> index 16r (the first scale of row r across sc01 | sc23); + G picks group G.
    const __m512i row_words =
        _mm512_setr_epi32(0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00100010, 0x00100010,
                          0x00100010, 0x00100010, 0x00200020, 0x00200020, 0x00200020, 0x00200020,
                          0x00300030, 0x00300030, 0x00300030, 0x00300030);
    // d of the 4 rows, lane 4r + l.
    const __m512 dr = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
        _mm512_castps128_ps512(
            _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 64)))));
    __m512i sumi[NX];
    for (int x = 0; x < NX; ++x) sumi[x] = _mm512_setzero_si512();
    for (int s = 0; s < 4; ++s) {
      const uint8_t* line = p + kQ6_KQuantsOffset + 192 * s;
      const __m512i qa = _mm512_loadu_si512(line), qb = _mm512_loadu_si512(line + 64);
      const __m512i qh = _mm512_loadu_si512(line + 128);
      // g = 0..3: elements 128h + 32g + 16t + [0, 16) of each row, group G = 8h + 2g + t; the
      // high bits (qh >> 2g) & 3 moved to bits 4..5 (bits shifted across bytes are masked off).
      const __m512i q[4] = {_mm512_or_si512(_mm512_and_si512(qa, low4),
                                            _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45)),
                            _mm512_or_si512(_mm512_and_si512(qb, low4),
                                            _mm512_and_si512(_mm512_slli_epi16(qh, 2), bits45)),
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qa, 4), low4),
                                            _mm512_and_si512(qh, bits45)),
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qb, 4), low4),
                                            _mm512_and_si512(_mm512_srli_epi16(qh, 2), bits45))};
      const int h = s / 2, t = s % 2;
      for (int g = 0; g < 4; ++g) {
        const int G = 8 * h + 2 * g + t;
        const __m512i scale = _mm512_permutex2var_epi16(
            sc01, _mm512_add_epi16(row_words, _mm512_set1_epi16(static_cast<int16_t>(G))), sc23);
        for (int x = 0; x < NX; ++x) {
          const __m512i aq = _mm512_broadcast_i32x4(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[x][u].qs + 16 * G)));
          sumi[x] = _mm512_dpwssd_epi32(sumi[x], _mm512_maddubs_epi16(q[g], aq), scale);
        }
      }
    }
    // Lanes 0..7 of off01 are row 0's sc * bsums pairs, 8..15 row 1's (off23: rows 2, 3); even
    // plus odd lanes put row r's 8 pairs into lanes 4r..4r+3.
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int x = 0; x < NX; ++x) {
      const ActBlockQ8K& ab = a[x][u];
      const __m512i bs =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums)));
      const __m512i off01 = _mm512_madd_epi16(sc01, bs), off23 = _mm512_madd_epi16(sc23, bs);
      const __m512i off = _mm512_add_epi32(_mm512_permutex2var_epi32(off01, even, off23),
                                           _mm512_permutex2var_epi32(off01, odd, off23));
      const __m512i dot = _mm512_sub_epi32(sumi[x], _mm512_slli_epi32(off, 5));
      __m512* acc = (u & 1) ? acc1 : acc0;
      acc[x] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dr, _mm512_set1_ps(ab.d)), acc[x]);
    }
  }
};
#else
using GroupQ6_K = void;  // restored rows through KernelQ6_K only
#endif

void MatmulRowsQ6_KRowGroups(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                             int64_t j_end, float* out, int64_t ldo) {
  MatmulRowGroupsQ<GroupQ6_K, KernelQ6_K>(DType::Q6_K, acts, n, k, w, j_begin, j_end, out, ldo);
}

bool Q6_KRowGroupsNative() { return INFERA_VNNI512 != 0; }

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(MatmulRowsQ6_K);
void matmul_rows_q6_k(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ6_K)(acts, n, k, w, j_begin, j_end, out, ldo);
}
HWY_EXPORT(MatmulRowsQ6_KRowGroups);
void matmul_rows_q6_k_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(MatmulRowsQ6_KRowGroups)(acts, n, k, w, j_begin, j_end, out, ldo);
}
HWY_EXPORT(Q6_KRowGroupsNative);
bool q6_k_rowgroups_native() { return HWY_DYNAMIC_DISPATCH(Q6_KRowGroupsNative)(); }
}  // namespace infera::cpu
#endif
