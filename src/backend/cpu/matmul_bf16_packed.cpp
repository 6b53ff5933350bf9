// The packed ("bf16 pairs") bf16 matmul of matmul_bf16_packed.h. AVX512-BF16 intrinsics directly,
// compiled for that target only and entered after has_bf16_dot() (as matmul_bf16_dot.cpp).
#include "backend/cpu/matmul_bf16_packed.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#define INFERA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

namespace infera::cpu {
namespace {

constexpr int kPrefillX = 6;    // activation rows per prefill tile
constexpr int kPrefillG = 4;    // groups per prefill tile: 24 accumulators + 4 weights + 1 pair
constexpr int kDecodeG = 8;     // groups per decode tile: 8 independent weight streams
constexpr int kDecodeRows = 4;  // fewer activation rows than this: the decode (GEMV) tiles
constexpr int kMaxX = kPrefillX, kMaxG = kDecodeG;

// NX activation rows x NG groups (16 weight rows each). w: the first group. Of the tile's 16 * NG
// output columns, [lo, hi) are stored (the rest are padding, another thread's, or outside a view),
// column lo at out[0], lo < 16.
template <int NX, int NG>
INFERA_BF16_TARGET void tile(const uint16_t* x, int64_t kp, const uint16_t* w, float* out,
                             int64_t ldo, int64_t lo, int64_t hi) {
  const int64_t group = kp * kBf16GroupRows, pairs = kp / 2;
  __m512 acc[NX][NG];
  for (int a = 0; a < NX; ++a)
    for (int b = 0; b < NG; ++b) acc[a][b] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh wv[NG];
    for (int b = 0; b < NG; ++b)
      wv[b] = (__m512bh)_mm512_loadu_si512(w + b * group + p * 2 * kBf16GroupRows);
    for (int a = 0; a < NX; ++a) {
      int32_t pair;
      std::memcpy(&pair, x + a * kp + 2 * p, sizeof pair);
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
      for (int b = 0; b < NG; ++b) acc[a][b] = _mm512_dpbf16_ps(acc[a][b], xv, wv[b]);
    }
  }
  for (int b = 0; b < NG; ++b) {
    const int64_t first = std::max<int64_t>(lo, b * kBf16GroupRows) - b * kBf16GroupRows;
    const int64_t last = std::min<int64_t>(hi - b * kBf16GroupRows, kBf16GroupRows);
    if (last <= first) continue;
    const int64_t at = b * kBf16GroupRows + first - lo;  // where lane `first` goes
    for (int a = 0; a < NX; ++a) {
      float* o = out + a * ldo + at;
      if (first == 0 && last == kBf16GroupRows) {
        _mm512_storeu_ps(o, acc[a][b]);
      } else {  // lanes [first, last) to o[0 ..): a compress of a contiguous lane range
        const auto mask = static_cast<__mmask16>(((1u << last) - 1) & ~((1u << first) - 1));
        _mm512_mask_compressstoreu_ps(o, mask, acc[a][b]);
      }
    }
  }
}

// Decode in lockstep: S distant streams of one group each. Group s is w + s * wstride and its 16
// outputs go to out + s * ostride (all stored: the caller hands whole groups only). Each output
// keeps its one accumulator taking the pairs in order: the same bits as tile<NX, NG> (tested).
// One group per stream, not the adjacent tile's 8: reading the packed layout, 1 thread read ~40
// GB/s with 2-5 distant one-group streams, 34-35 with 8 adjacent groups (32 KB apart) or 8
// distant ones, 36 with 4 x 2 adjacent (CPU time; docs/notes/2026-12-01/issue-8-cpudec.md).
template <int NX, int S>
INFERA_BF16_TARGET void stream_tile(const uint16_t* x, int64_t kp, const uint16_t* w,
                                    int64_t wstride, float* out, int64_t ldo, int64_t ostride) {
  const int64_t pairs = kp / 2;
  const uint16_t* wg[S];
  for (int s = 0; s < S; ++s) wg[s] = w + s * wstride;
  __m512 acc[NX][S];
  for (int i = 0; i < NX; ++i)
    for (int s = 0; s < S; ++s) acc[i][s] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh wv[S];
    for (int s = 0; s < S; ++s)
      wv[s] = (__m512bh)_mm512_loadu_si512(wg[s] + p * 2 * kBf16GroupRows);
    for (int i = 0; i < NX; ++i) {
      int32_t pair;
      std::memcpy(&pair, x + i * kp + 2 * p, sizeof pair);
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
      for (int s = 0; s < S; ++s) acc[i][s] = _mm512_dpbf16_ps(acc[i][s], xv, wv[s]);
    }
  }
  for (int i = 0; i < NX; ++i)
    for (int s = 0; s < S; ++s) _mm512_storeu_ps(out + i * ldo + s * ostride, acc[i][s]);
}

using TileFn = void (*)(const uint16_t*, int64_t, const uint16_t*, float*, int64_t, int64_t,
                        int64_t);
using StreamTileFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t,
                              int64_t);

template <int NX, int... G>
constexpr std::array<TileFn, kMaxG> tiles_for_rows(std::integer_sequence<int, G...>) {
  return {&tile<NX, G + 1>...};
}
template <int... X>
constexpr std::array<std::array<TileFn, kMaxG>, kMaxX> make_tiles(
    std::integer_sequence<int, X...>) {
  return {tiles_for_rows<X + 1>(std::make_integer_sequence<int, kMaxG>{})...};
}
// kTiles[nx - 1][ng - 1] = tile<nx, ng>.
constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kMaxX>{});

// kStreamTiles[nx - 1][log2(S) - 1] = stream_tile<nx, S>, S = 2, 4, 8.
template <int NX>
constexpr std::array<StreamTileFn, 3> stream_tiles_for_rows() {
  return {&stream_tile<NX, 2>, &stream_tile<NX, 4>, &stream_tile<NX, 8>};
}
constexpr std::array<std::array<StreamTileFn, 3>, kDecodeRows - 1> kStreamTiles = {
    stream_tiles_for_rows<1>(), stream_tiles_for_rows<2>(), stream_tiles_for_rows<3>()};

}  // namespace

void pack_bf16_pairs(const uint16_t* w, int64_t m, int64_t k, uint16_t* dst) {
  const int64_t kp = bf16_pairs_width(k), pairs = kp / 2;
  const int64_t groups = (m + kBf16GroupRows - 1) / kBf16GroupRows;
  for (int64_t g = 0; g < groups; ++g) {
    uint16_t* gdst = dst + g * kp * kBf16GroupRows;
    for (int64_t r = 0; r < kBf16GroupRows; ++r) {
      const int64_t row = g * kBf16GroupRows + r;
      const uint16_t* src = row < m ? w + row * k : nullptr;
      if (src && k % 2 == 0) {  // the common case, a pair at a time (load time: see the note)
        for (int64_t p = 0; p < pairs; ++p)
          std::memcpy(gdst + p * 2 * kBf16GroupRows + 2 * r, src + 2 * p, 4);
        continue;
      }
      for (int64_t p = 0; p < pairs; ++p) {
        uint16_t* d = gdst + p * 2 * kBf16GroupRows + 2 * r;
        d[0] = src ? src[2 * p] : 0;
        d[1] = src && 2 * p + 1 < k ? src[2 * p + 1] : 0;
      }
    }
  }
}

void bf16_pairs_row(const uint16_t* packed, int64_t k, int64_t row, uint16_t* dst) {
  const int64_t kp = bf16_pairs_width(k);
  const uint16_t* g = packed + row / kBf16GroupRows * kp * kBf16GroupRows;
  const int64_t r = row % kBf16GroupRows;
  for (int64_t p = 0; p < k; ++p) dst[p] = g[p / 2 * 2 * kBf16GroupRows + 2 * r + p % 2];
}

INFERA_BF16_TARGET void round_rows_to_bf16_pairs(const float* src, int64_t n, int64_t k,
                                                 uint16_t* dst) {
  const int64_t kp = bf16_pairs_width(k);
  for (int64_t i = 0; i < n; ++i) {
    const float* s = src + i * k;
    uint16_t* d = dst + i * kp;
    int64_t p = 0;
    for (; p + 16 <= k; p += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + p),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + p)));
    if (p < k) {  // the tail, and the pad element zeroed (a masked-off lane converts 0.0f)
      const __mmask16 load = static_cast<__mmask16>((1u << (k - p)) - 1);
      const __mmask16 store = static_cast<__mmask16>((1u << (kp - p)) - 1);
      const __m256i r = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(load, s + p));
      _mm256_mask_storeu_epi16(d + p, store, r);
    }
  }
}

void matmul_rows_bf16_pairs(const uint16_t* x, int64_t n, int64_t k, const uint16_t* w,
                            int64_t j_begin, int64_t j_end, float* out, int64_t ldo, int64_t col0,
                            int streams) {
  if (n <= 0 || j_end <= j_begin) return;
  const int64_t kp = bf16_pairs_width(k), group = kp * kBf16GroupRows;
  const int64_t g_begin = j_begin / kBf16GroupRows;
  const int64_t g_end = (j_end + kBf16GroupRows - 1) / kBf16GroupRows;
  auto run = [&](int64_t i, int nx, int64_t g, int ng) {
    const int64_t j0 = g * kBf16GroupRows, first = std::max(j0, j_begin);
    kTiles[static_cast<size_t>(nx - 1)][static_cast<size_t>(ng - 1)](
        x + i * kp, kp, w + g * group, out + i * ldo + (first - col0), ldo, first - j0,
        std::min(j_end, j0 + ng * kBf16GroupRows) - j0);
  };
  // Groups [a, b) kDecodeG at a time, adjacent (one stream of kDecodeG 32 KB-apart reads).
  auto adjacent = [&](int64_t a, int64_t b) {
    for (int64_t g = a; g < b; g += kDecodeG)
      run(0, static_cast<int>(n), g, static_cast<int>(std::min<int64_t>(kDecodeG, b - g)));
  };
  if (n < kDecodeRows) {  // decode: each weight group streamed once for the few rows
    const int64_t full_begin = (j_begin + kBf16GroupRows - 1) / kBf16GroupRows;
    const int64_t full_end = j_end / kBf16GroupRows;
    const int s_index = streams == 2 ? 0 : streams == 4 ? 1 : streams == 8 ? 2 : -1;
    const int64_t per_group =
        s_index < 0 ? 0 : std::max<int64_t>(0, full_end - full_begin) / streams;
    if (per_group == 0) return adjacent(g_begin, g_end);
    // Lockstep: the whole groups cut into `streams` ranges of per_group groups, one group of each
    // per tile; partial edge groups and the leftover whole groups through the adjacent tiles.
    if (g_begin < full_begin) adjacent(g_begin, full_begin);
    const StreamTileFn fn = kStreamTiles[static_cast<size_t>(n - 1)][static_cast<size_t>(s_index)];
    for (int64_t g = full_begin; g < full_begin + per_group; ++g)
      fn(x, kp, w + g * group, per_group * group, out + (g * kBf16GroupRows - col0), ldo,
         per_group * kBf16GroupRows);
    adjacent(full_begin + streams * per_group, g_end);
    return;
  }
  // A block of kPrefillG groups stays in L2 while every activation row passes over it.
  for (int64_t g = g_begin; g < g_end; g += kPrefillG) {
    const int ng = static_cast<int>(std::min<int64_t>(kPrefillG, g_end - g));
    for (int64_t i = 0; i < n; i += kPrefillX)
      run(i, static_cast<int>(std::min<int64_t>(kPrefillX, n - i)), g, ng);
  }
}

}  // namespace infera::cpu
