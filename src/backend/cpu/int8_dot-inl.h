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
#include <vector>

#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
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

// Highway's AVX3_DL target string also enables AVX-VNNI, so for 256-bit vpdpbusd / vpdpwssd the
// compiler may pick the VEX encoding (AVX-VNNI), which a CPU with AVX512-VNNI but without AVX-VNNI
// (AMD Zen 4; AVX3_DL's run-time check asks only for AVX512-VNNI) faults on with SIGILL. The
// {evex} pseudo-prefix pins the AVX512-VNNI + VL encoding the target's check guarantees.
HWY_INLINE __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
#if HWY_TARGET == HWY_AVX3_DL
  __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
  return acc;
#else
  const __m256i pairs = _mm256_maddubs_epi16(u, s);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

// acc + the int16 pairs of `pairs` times `scales`, summed into int32 lanes (vpdpwssd on AVX3_DL).
HWY_INLINE __m256i MaddAdd16(__m256i acc, __m256i pairs, __m256i scales) {
#if HWY_TARGET == HWY_AVX3_DL
  __asm__("%{evex%} vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(pairs), "v"(scales));  // see DotU8S8
  return acc;
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
//
// Single-row decode with quant_gemv_streams() = S > 1 (auto: Kernel::kAutoGemvStreams), for
// kernels that define Rows<S>(S weight rows, one activation row, blocks, S outputs) (they say so
// with kAutoGemvStreams > 0):
// rows [j_begin, j_end) are cut into S equal ranges and row i of every range is dotted in
// lockstep, one block of each per step (S sequential streams in flight); leftover rows one by one.
template <class Kernel, int S>
void MatmulRowsLockstepQ(const uint8_t* acts, int64_t blocks, const uint8_t* w, int64_t w_row_bytes,
                         int64_t j_begin, int64_t j_end, float* out) {
  const int64_t per = (j_end - j_begin) / S;
  const uint8_t* wr[S];
  float* o[S];
  for (int64_t i = 0; i < per; ++i) {
    for (int s = 0; s < S; ++s) {
      const int64_t j = j_begin + s * per + i;
      wr[s] = w + j * w_row_bytes;
      o[s] = out + j;
    }
    Kernel::template Rows<S>(wr, acts, blocks, o);
  }
  for (int64_t j = j_begin + S * per; j < j_end; ++j)
    Kernel::template Row<1>(w + j * w_row_bytes, acts, 0, blocks, out + j, 0);
}

template <class Kernel>
void MatmulRowsQ(const uint8_t* acts, int64_t act_row_bytes, int64_t n, int64_t blocks,
                 const uint8_t* w, int64_t w_row_bytes, int64_t j_begin, int64_t j_end, float* out,
                 int64_t ldo) {
  if constexpr (Kernel::kAutoGemvStreams > 0) {
    if (n == 1) {
      const int streams = quant_gemv_streams();
      switch (streams == 0 ? Kernel::kAutoGemvStreams : streams) {
        case 2:
          return MatmulRowsLockstepQ<Kernel, 2>(acts, blocks, w, w_row_bytes, j_begin, j_end, out);
        case 4:
          return MatmulRowsLockstepQ<Kernel, 4>(acts, blocks, w, w_row_bytes, j_begin, j_end, out);
        case 8:
          return MatmulRowsLockstepQ<Kernel, 8>(acts, blocks, w, w_row_bytes, j_begin, j_end, out);
        default:
          break;
      }
    }
  }
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

// The row-group GEMV driver shared by the types of weight_rowgroups.h: groups [j_begin, j_end)
// (multiples of kGroupRows) against n activation rows, 4 at a time. Where the 512-bit kernels are
// built, Group::Unit<NX>(unit bytes, activation rows, unit index, acc0, acc1) adds one unit's
// products into lanes 4r..4r+3 (row r) of acc0 / acc1 (two accumulators, for kernels that
// alternate chains), and the 4 lanes of each row are summed at the end. Elsewhere each group's 4
// rows are restored as in the file and Plain's per-row kernel runs over them (correct
// everywhere; the CPU backend repacks only where the native path runs).
#if INFERA_VNNI512
// Software prefetch of one unit's lines, `ahead` bytes past them (rowgroup_prefetch_bytes(); the
// caller skips this for 0).
template <class Group>
HWY_INLINE void PrefetchUnit(const uint8_t* unit, int64_t ahead) {
  for (int64_t o = 0; o < Group::kBytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(unit) + o + ahead, _MM_HINT_T0);
}

template <class Group, int NX>
HWY_INLINE void RowGroupRows(const uint8_t* group, const uint8_t* acts, int64_t act_row_bytes,
                             int64_t units, float* out, int64_t ldo, int64_t ahead) {
  const typename Group::Act* a[NX];
  for (int x = 0; x < NX; ++x)
    a[x] = reinterpret_cast<const typename Group::Act*>(acts + x * act_row_bytes);
  __m512 acc0[NX], acc1[NX];
  for (int x = 0; x < NX; ++x) acc0[x] = acc1[x] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    if (ahead) PrefetchUnit<Group>(group + u * Group::kBytes, ahead);
    Group::template Unit<NX>(group + u * Group::kBytes, a, u, acc0, acc1);
  }
  for (int x = 0; x < NX; ++x) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(acc0[x], acc1[x]));
    for (int r = 0; r < 4; ++r)
      out[x * ldo + r] = (lanes[4 * r] + lanes[4 * r + 1]) + (lanes[4 * r + 2] + lanes[4 * r + 3]);
  }
}

// S groups (anywhere in the matrix) against one activation row in lockstep: unit u of every
// group, then unit u + 1. Each group has its own two accumulators and takes exactly the
// operations of RowGroupRows<Group, 1> in the same order (bit-identical outputs).
template <class Group, int S>
HWY_INLINE void RowGroupRowsLockstep(const uint8_t* const* groups, const uint8_t* acts,
                                     int64_t units, float* const* outs, int64_t ahead) {
  const typename Group::Act* a[1] = {reinterpret_cast<const typename Group::Act*>(acts)};
  __m512 acc0[S], acc1[S];
  for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    if (ahead)
      for (int s = 0; s < S; ++s) PrefetchUnit<Group>(groups[s] + u * Group::kBytes, ahead);
#pragma GCC unroll 8  // every stream in registers (a loop over s spills the accumulators)
    for (int s = 0; s < S; ++s)
      Group::template Unit<1>(groups[s] + u * Group::kBytes, a, u, &acc0[s], &acc1[s]);
  }
  for (int s = 0; s < S; ++s) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(acc0[s], acc1[s]));
    for (int r = 0; r < 4; ++r)
      outs[s][r] = (lanes[4 * r] + lanes[4 * r + 1]) + (lanes[4 * r + 2] + lanes[4 * r + 3]);
  }
}

// Streams of the row-group GEMVs when quant_gemv_streams() is auto (measured best, all three
// types; docs/notes/2026-12-01/issue-8-cpuq.md).
constexpr int kAutoGemvStreamsRowGroups = 4;

// Single-row decode with quant_gemv_streams() = S > 1: the groups of [j_begin, j_end) cut into S
// equal ranges, group i of every range in lockstep (S streams in flight), leftovers one by one.
template <class Group, int S>
void RowGroupsLockstep(const uint8_t* w, int64_t row_bytes, const uint8_t* acts, int64_t units,
                       int64_t j_begin, int64_t j_end, float* out, int64_t ahead) {
  const int64_t groups = (j_end - j_begin) / kGroupRows, per = groups / S;
  const uint8_t* g[S];
  float* o[S];
  for (int64_t i = 0; i < per; ++i) {
    for (int s = 0; s < S; ++s) {
      const int64_t j = j_begin + (s * per + i) * kGroupRows;
      g[s] = w + j * row_bytes;  // group j / 4 starts where row j started
      o[s] = out + j;
    }
    RowGroupRowsLockstep<Group, S>(g, acts, units, o, ahead);
  }
  for (int64_t j = j_begin + S * per * kGroupRows; j < j_end; j += kGroupRows)
    RowGroupRows<Group, 1>(w + j * row_bytes, acts, 0, units, out + j, 0, ahead);
}
#endif

template <class Group, class Plain>
void MatmulRowGroupsQ(DType dtype, const void* acts, int64_t n, int64_t k, const void* w,
                      int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  const auto* ab = static_cast<const uint8_t*>(acts);
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t act_bytes = activation_row_bytes(dtype, k);
  const auto row_bytes = static_cast<int64_t>(dtype_bytes(dtype, static_cast<size_t>(k)));
#if INFERA_VNNI512
  const int64_t units = k / kUnitElements;
  // Kernels that read their activation bytes in another order (Group::PermuteActs) get a copy so
  // ordered, in a buffer that only grows (no allocation once the largest call has been seen).
  if constexpr (requires { Group::PermuteActs; }) {
    using Act = typename Group::Act;  // one block a unit (ActBlockQ8K), rows act_bytes apart
    thread_local std::vector<Act> permuted;
    const int64_t blocks = k / kUnitElements;
    if (permuted.size() < static_cast<size_t>(n * blocks))
      permuted.resize(static_cast<size_t>(n * blocks));
    for (int64_t i = 0; i < n; ++i)
      Group::PermuteActs(reinterpret_cast<const Act*>(ab + i * act_bytes), blocks,
                         permuted.data() + i * blocks);
    ab = reinterpret_cast<const uint8_t*>(permuted.data());
  }
  const int64_t ahead = rowgroup_prefetch_bytes();
  if (n == 1) {
    const int streams = quant_gemv_streams();
    switch (streams == 0 ? kAutoGemvStreamsRowGroups : streams) {
      case 2:
        return RowGroupsLockstep<Group, 2>(wb, row_bytes, ab, units, j_begin, j_end, out, ahead);
      case 4:
        return RowGroupsLockstep<Group, 4>(wb, row_bytes, ab, units, j_begin, j_end, out, ahead);
      case 8:
        return RowGroupsLockstep<Group, 8>(wb, row_bytes, ab, units, j_begin, j_end, out, ahead);
      default:
        break;
    }
  }
  for (int64_t j = j_begin; j < j_end; j += kGroupRows) {
    const uint8_t* group = wb + j * row_bytes;  // group j / 4 starts where row j started
    for (int64_t i = 0; i < n; i += 4) {
      const uint8_t* a = ab + i * act_bytes;
      float* o = out + i * ldo + j;
      switch (std::min<int64_t>(4, n - i)) {
        case 4:
          RowGroupRows<Group, 4>(group, a, act_bytes, units, o, ldo, ahead);
          break;
        case 3:
          RowGroupRows<Group, 3>(group, a, act_bytes, units, o, ldo, ahead);
          break;
        case 2:
          RowGroupRows<Group, 2>(group, a, act_bytes, units, o, ldo, ahead);
          break;
        default:
          RowGroupRows<Group, 1>(group, a, act_bytes, units, o, ldo, ahead);
          break;
      }
    }
  }
#else
  std::vector<uint8_t> rows(static_cast<size_t>(kGroupRows * row_bytes));
  for (int64_t j = j_begin; j < j_end; j += kGroupRows) {
    for (int64_t r = 0; r < kGroupRows; ++r)
      rowgroups_row(dtype, w, k, j + r, rows.data() + r * row_bytes);
    MatmulRowsQ<Plain>(ab, act_bytes, n, k / dtype_block_size(dtype), rows.data(), row_bytes, 0,
                       kGroupRows, out + j, ldo);
  }
  (void)wb;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard
