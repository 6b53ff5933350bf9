// Highway 1.0.3 (Debian 12) has no bf16 dot-product op, so these kernels use the AVX512-BF16
// intrinsics directly, compiled for that target only and entered after a CPUID check.
#include "backend/cpu/matmul_bf16_dot.h"

#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/simd_kernels.h"  // kPanelRows, the split the backend hands out

#define INFERA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

namespace infera::cpu {
namespace {

constexpr int64_t kLanes = 32;         // bf16 elements per 512-bit vector
constexpr int kTileX = 4, kTileW = 4;  // 16 accumulators + 8 operands of 32 registers

// Vector v of a k-element row: 32 elements, or the masked tail (zeros add nothing).
struct RowVectors {
  int64_t count;
  __mmask32 last_mask;
  explicit RowVectors(int64_t k)
      : count((k + kLanes - 1) / kLanes),
        last_mask(k % kLanes ? (__mmask32{1} << (k % kLanes)) - 1 : ~__mmask32{0}) {}
  // Full vectors load unmasked (masked loads are slower on some CPUs); the last one masked.
  INFERA_BF16_TARGET static __m512bh full(const uint16_t* row, int64_t v) {
    return (__m512bh)_mm512_loadu_si512(row + v * kLanes);
  }
  INFERA_BF16_TARGET __m512bh last(const uint16_t* row) const {
    return (__m512bh)_mm512_maskz_loadu_epi16(last_mask, row + (count - 1) * kLanes);
  }
};

// The 16 lanes summed in one fixed order (GCC 12's _mm512_reduce_add_ps warns spuriously).
INFERA_BF16_TARGET inline float sum_lanes(__m512 v) {
  const __m256 h8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  h4 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  h4 = _mm_add_ss(h4, _mm_movehdup_ps(h4));
  return _mm_cvtss_f32(h4);
}

// One accumulator per output, summed vector by vector, then across lanes: the order every path
// uses (more chains per output would speed decode but cost prefill, see simd_kernels.cpp).
template <int NX, int NW>
INFERA_BF16_TARGET inline void tile(const uint16_t* x, int64_t k, const uint16_t* w,
                                    const RowVectors& rv, float* out, int64_t ldo) {
  __m512 acc[NX][NW];
  for (int a = 0; a < NX; ++a)
    for (int b = 0; b < NW; ++b) acc[a][b] = _mm512_setzero_ps();
  for (int64_t v = 0; v + 1 < rv.count; ++v) {
    __m512bh wv[NW];
    for (int b = 0; b < NW; ++b) wv[b] = RowVectors::full(w + b * k, v);
    for (int a = 0; a < NX; ++a) {
      const __m512bh xv = RowVectors::full(x + a * k, v);
      for (int b = 0; b < NW; ++b) acc[a][b] = _mm512_dpbf16_ps(acc[a][b], xv, wv[b]);
    }
  }
  if (rv.count > 0) {
    __m512bh wv[NW];
    for (int b = 0; b < NW; ++b) wv[b] = rv.last(w + b * k);
    for (int a = 0; a < NX; ++a) {
      const __m512bh xv = rv.last(x + a * k);
      for (int b = 0; b < NW; ++b) acc[a][b] = _mm512_dpbf16_ps(acc[a][b], xv, wv[b]);
    }
  }
  for (int a = 0; a < NX; ++a)
    for (int b = 0; b < NW; ++b) out[a * ldo + b] = sum_lanes(acc[a][b]);
}

}  // namespace

bool has_bf16_dot() {
  static const bool ok = __builtin_cpu_supports("avx512bf16") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

INFERA_BF16_TARGET void round_rows_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i r = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, r);
  }
}

INFERA_BF16_TARGET void matmul_rows_bf16_dot(const uint16_t* x, int64_t n, int64_t k,
                                             const uint16_t* w, int64_t j_begin, int64_t j_end,
                                             float* out, int64_t ldo) {
  const RowVectors rv(k);
  if (n < kTileX) {  // decode: stream each weight row once for the few x rows
    for (int64_t j = j_begin; j < j_end; ++j)
      for (int64_t i = 0; i < n; ++i)
        tile<1, 1>(x + i * k, k, w + j * k, rv, out + i * ldo + j, ldo);
    return;
  }
  // A panel of weight rows stays in L1/L2 while every x row passes over it.
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kPanelRows) {
    const int64_t j1 = std::min(j_end, j0 + kPanelRows);
    int64_t i = 0;
    for (; i + kTileX <= n; i += kTileX) {
      int64_t j = j0;
      for (; j + kTileW <= j1; j += kTileW)
        tile<kTileX, kTileW>(x + i * k, k, w + j * k, rv, out + i * ldo + j, ldo);
      for (; j < j1; ++j) tile<kTileX, 1>(x + i * k, k, w + j * k, rv, out + i * ldo + j, ldo);
    }
    for (; i < n; ++i) {
      int64_t j = j0;
      for (; j + kTileW <= j1; j += kTileW)
        tile<1, kTileW>(x + i * k, k, w + j * k, rv, out + i * ldo + j, ldo);
      for (; j < j1; ++j) tile<1, 1>(x + i * k, k, w + j * k, rv, out + i * ldo + j, ldo);
    }
  }
}

}  // namespace infera::cpu
