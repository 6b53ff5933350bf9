// The int8 GEMM of matmul_int8_gemm.h. Highway 1.0.3 has no byte dot-product op, so this file
// uses the AVX512-VNNI intrinsics directly, compiled for that target only and entered after a
// CPUID check (as matmul_bf16_dot.cpp does for AVX512-BF16).
#include "backend/cpu/matmul_int8_gemm.h"

// GCC 12 reports the _mm*_undefined_* operands inside its own AVX-512 intrinsics (casts, masked
// ops) as uninitialized when they are inlined into target-attributed functions; spurious.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/simd_kernels.h"  // kPanelRows, the split every matmul path hands out
#include "backend/cpu/weight_rowgroups.h"
#include "infera/error.h"
#include "quant/block_formats.h"

#define INFERA_VNNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,f16c,fma")))

namespace infera::cpu {
namespace {

constexpr int kTileRows = 8;  // activation rows per register tile (8 accumulators + 8-12 operands)
static_assert(kPanelRows == 16, "one 512-bit vector holds the panel's 16 rows of int32 / f32");

// How a weight type enters the GEMM: sub-block size, the offset its unsigned bytes carry, and
// whether a per-sub-block min is subtracted (Q4_K).
struct Format {
  int sub;         // elements per sub-block (one scale)
  int zero_point;  // stored byte = value + zero_point
  bool has_min;
};

Format format_of(DType t) {
  switch (t) {
    case DType::Q8_0:
      return {32, 128, false};
    case DType::Q4_0:
      return {32, 8, false};
    case DType::Q4_K:
      return {32, 0, true};
    default:  // Q6_K
      return {16, 32, false};
  }
}

// Activations of one call: int8 values row by row, and per row and sub-block the scale d, the
// offset -zero_point * sum(q) and (Q4_K) d * sum(q).
struct Activations {
  std::vector<int8_t> qs;
  std::vector<float> d, dsum;
  std::vector<int32_t> offset;
};

// One unpacked panel: q[64 * (e / 4) + 4 * r + e % 4] = byte of row r, element e (so the 4-byte
// groups of sub-block sb are vectors sb * sub / 4 ...); scale / min[sb * 16 + r].
struct Panel {
  std::vector<uint8_t> q;
  std::vector<float> scale, min;
  std::vector<uint8_t> row_values;  // the 16 rows' bytes, row by row, while unpacking
  std::vector<float> row_scale, row_min;
};

// Lane reductions in a fixed order (GCC 12's _mm512_reduce_* intrinsics warn spuriously).
INFERA_VNNI_TARGET inline float max_lanes(__m512 v) {
  __m256 h8 = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 h4 = _mm_max_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  h4 = _mm_max_ps(h4, _mm_movehl_ps(h4, h4));
  h4 = _mm_max_ss(h4, _mm_movehdup_ps(h4));
  return _mm_cvtss_f32(h4);
}
INFERA_VNNI_TARGET inline int32_t sum_lanes(__m512i v) {
  __m256i h8 = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h8), _mm256_extracti128_si256(h8, 1));
  h4 = _mm_add_epi32(h4, _mm_shuffle_epi32(h4, 0x4E));
  h4 = _mm_add_epi32(h4, _mm_shuffle_epi32(h4, 0xB1));
  return _mm_cvtsi128_si32(h4);
}

// d = max|x| / 127, q = round-half-even(x * 127 / max|x|), as quantize_activation_row.
template <int S>
INFERA_VNNI_TARGET void quantize_sub_block(const float* x, int8_t* q, float& d, int32_t& sum) {
  __m512 v[S / 16];
  __m512 amax = _mm512_setzero_ps();
  for (int i = 0; i < S / 16; ++i) {
    v[i] = _mm512_loadu_ps(x + 16 * i);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v[i]));
  }
  const float mx = max_lanes(amax);
  const __m512 inv = _mm512_set1_ps(mx > 0.0f ? 127.0f / mx : 0.0f);
  __m512i s = _mm512_setzero_si512();
  for (int i = 0; i < S / 16; ++i) {
    const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(v[i], inv));  // MXCSR: nearest even
    s = _mm512_add_epi32(s, qi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * i), _mm512_cvtepi32_epi8(qi));
  }
  d = mx / 127.0f;
  sum = sum_lanes(s);
}

void quantize_activations(ThreadPool& pool, const float* x, int64_t n, int64_t k, Format f,
                          Activations& a) {
  const int64_t nsb = k / f.sub;
  a.qs.resize(static_cast<size_t>(n * k));
  a.d.resize(static_cast<size_t>(n * nsb));
  a.dsum.resize(static_cast<size_t>(n * nsb));
  a.offset.resize(static_cast<size_t>(n * nsb));
  pool.parallel_for(n, 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const size_t at = static_cast<size_t>(i * nsb + sb);
        int32_t sum;
        if (f.sub == 32) {
          quantize_sub_block<32>(x + i * k + 32 * sb, a.qs.data() + i * k + 32 * sb, a.d[at], sum);
        } else {
          quantize_sub_block<16>(x + i * k + 16 * sb, a.qs.data() + i * k + 16 * sb, a.d[at], sum);
        }
        a.offset[at] = -f.zero_point * sum;
        a.dsum[at] = a.d[at] * static_cast<float>(sum);
      }
    }
  });
}

INFERA_VNNI_TARGET inline __m128i load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
INFERA_VNNI_TARGET inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// 16 bytes at lo, then 16 at hi, as one 32-byte vector.
INFERA_VNNI_TARGET inline __m256i load16x2(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_set_m128i(load16(hi), load16(lo));
}
INFERA_VNNI_TARGET inline void store16(uint8_t* p, __m128i x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), x);
}
INFERA_VNNI_TARGET inline void store32(uint8_t* p, __m256i x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x);
}

// The 8 bytes of two words as f32.
INFERA_VNNI_TARGET inline __m256 bytes_to_f32x8(const uint32_t bytes[2]) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
      _mm_set_epi32(0, 0, static_cast<int>(bytes[1]), static_cast<int>(bytes[0]))));
}

// A Q4_K super-block's 12 packed scale bytes (as 3 little-endian words) to d * sc[s] and
// dmin * m[s] for s < 8 in f32 (the products quant::q4_k_scale_min's values give, all 8 at once:
// the scalar loop was most of a Q4_K panel's unpack).
INFERA_VNNI_TARGET inline void q4_k_scales_mins(const uint32_t w[3], float d, float dmin,
                                                float* scale, float* min) {
  const uint32_t sc[2] = {w[0] & 0x3F3F3F3Fu,
                          (w[2] & 0x0F0F0F0Fu) | (((w[0] >> 6) & 0x03030303u) << 4)};
  const uint32_t mn[2] = {w[1] & 0x3F3F3F3Fu,
                          ((w[2] >> 4) & 0x0F0F0F0Fu) | (((w[1] >> 6) & 0x03030303u) << 4)};
  _mm256_storeu_ps(scale, _mm256_mul_ps(_mm256_set1_ps(d), bytes_to_f32x8(sc)));
  _mm256_storeu_ps(min, _mm256_mul_ps(_mm256_set1_ps(dmin), bytes_to_f32x8(mn)));
}

// One half (128 elements) of a Q6_K super-block's values, unsigned (value + 32), to v: ql0 / ql1
// its ql bytes [0, 32) / [32, 64), qh its qh bytes [0, 32).
INFERA_VNNI_TARGET inline void unpack_q6_k_half(__m256i ql0, __m256i ql1, __m256i qh, uint8_t* v) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(0x03);
  const __m256i lows[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                           _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                           _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
  for (int g = 0; g < 4; ++g) {
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), low2);
    store32(v + 32 * g, _mm256_or_si256(lows[g], _mm256_slli_epi16(high, 4)));
  }
}

// One weight row to unsigned bytes (value + zero_point) and per-sub-block scales / mins, with the
// reference dequantizer's scale products (d * sc, dmin * m in f32). Explicit vectors: the byte
// pointers may alias, so the compiler leaves the plain loops scalar.
INFERA_VNNI_TARGET void unpack_row(const uint8_t* src, DType t, int64_t k, uint8_t* v, float* scale,
                                   float* min) {
  const __m128i low4x16 = _mm_set1_epi8(0x0F);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  switch (t) {
    case DType::Q8_0:
      for (int64_t b = 0; b < k / 32; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ8_0*>(src)[b];
        scale[b] = quant::half_to_float(blk.d);
        store32(v + 32 * b, _mm256_xor_si256(load32(reinterpret_cast<const uint8_t*>(blk.qs)),
                                             _mm256_set1_epi8(static_cast<char>(0x80))));
      }
      return;
    case DType::Q4_0:
      for (int64_t b = 0; b < k / 32; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ4_0*>(src)[b];
        scale[b] = quant::half_to_float(blk.d);
        const __m128i q = load16(blk.qs);
        store16(v + 32 * b, _mm_and_si128(q, low4x16));
        store16(v + 32 * b + 16, _mm_and_si128(_mm_srli_epi16(q, 4), low4x16));
      }
      return;
    case DType::Q4_K:
      for (int64_t b = 0; b < k / 256; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ4_K*>(src)[b];
        uint32_t words[3];
        std::memcpy(words, blk.scales, 12);
        q4_k_scales_mins(words, quant::half_to_float(blk.d), quant::half_to_float(blk.dmin),
                         scale + 8 * b, min + 8 * b);
        for (int c = 0; c < 4; ++c) {  // chunk c: sub-block 2c low nibbles, 2c + 1 high
          const __m256i q = load32(blk.qs + 32 * c);
          store32(v + 256 * b + 64 * c, _mm256_and_si256(q, low4));
          store32(v + 256 * b + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
        }
      }
      return;
    default:  // Q6_K
      for (int64_t b = 0; b < k / 256; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ6_K*>(src)[b];
        const float d = quant::half_to_float(blk.d);
        for (int s = 0; s < 16; ++s) scale[16 * b + s] = d * static_cast<float>(blk.scales[s]);
        for (int half = 0; half < 2; ++half)
          unpack_q6_k_half(load32(blk.ql + 64 * half), load32(blk.ql + 64 * half + 32),
                           load32(blk.qh + 32 * half), v + 256 * b + 128 * half);
      }
      return;
  }
}

// Transposes 16 rows x 8 dwords (row r's 32 bytes at rows + r * stride) into 8 vectors of 16
// lanes, vector g lane r = row r's dword g, stored at out + 64 * g: an 8 x 8 dword transpose in
// each 256-bit half (rows r and r + 8 share a register), then one qword permute per output pair.
INFERA_VNNI_TARGET inline void transpose_16x8(const uint8_t* rows, int64_t stride, uint8_t* out) {
  __m512i z[8];
  for (int r = 0; r < 8; ++r)
    z[r] = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + r * stride))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + (r + 8) * stride)), 1);
  __m512i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3 (t0..t3) and rows 4-7 (t4..t7) of each half
    const __m512i* th = t + 4 * h;
    u[4 * h + 0] = _mm512_unpacklo_epi64(th[0], th[2]);  // dword 0 (and 4) of 4 rows
    u[4 * h + 1] = _mm512_unpackhi_epi64(th[0], th[2]);  // dword 1 (and 5)
    u[4 * h + 2] = _mm512_unpacklo_epi64(th[1], th[3]);  // dword 2 (and 6)
    u[4 * h + 3] = _mm512_unpackhi_epi64(th[1], th[3]);  // dword 3 (and 7)
  }
  // u[d] 128-bit lanes: [dword d of rows 0-3, dword d + 4 of rows 0-3, the same of rows 8-11];
  // u[4 + d] the same for rows 4-7 / 12-15.
  const __m512i low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int d = 0; d < 4; ++d) {
    _mm512_storeu_si512(out + 64 * d, _mm512_permutex2var_epi64(u[d], low, u[4 + d]));
    _mm512_storeu_si512(out + 64 * (d + 4), _mm512_permutex2var_epi64(u[d], high, u[4 + d]));
  }
}

// Row rr (< 4) of a Q4_0 row group (weight_rowgroups.h) straight from the group, as unpack_row
// does for a row in the file's layout (no copy of the row first: that cost 6 % of a 128-token
// prefill).
INFERA_VNNI_TARGET void unpack_q4_0_group_row(const uint8_t* group, int64_t rr, int64_t k,
                                              uint8_t* v, float* scale) {
  const __m128i low4x16 = _mm_set1_epi8(0x0F);
  for (int64_t b = 0; b < k / 32; ++b) {
    const uint8_t* unit = group + (b / 8) * kUnitBytes;
    uint16_t d;
    std::memcpy(&d, unit + 2 * (4 * (b % 8) + rr), 2);
    scale[b] = quant::half_to_float(d);
    const __m128i q = load16(unit + 64 + 64 * (b % 8) + 16 * rr);
    store16(v + 32 * b, _mm_and_si128(q, low4x16));
    store16(v + 32 * b + 16, _mm_and_si128(_mm_srli_epi16(q, 4), low4x16));
  }
}

// Row rr (< 4) of a Q8_0 row group straight from the group, as unpack_row does for a row in the
// file's layout (bytes + 128, the zero point, by XOR 0x80).
INFERA_VNNI_TARGET void unpack_q8_0_group_row(const uint8_t* group, int64_t rr, int64_t k,
                                              uint8_t* v, float* scale) {
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < k / 32; ++b) {
    const uint8_t* unit = group + (b / 8) * kUnitBytesQ8_0;
    uint16_t d;
    std::memcpy(&d, unit + 2 * (4 * (b % 8) + rr), 2);
    scale[b] = quant::half_to_float(d);
    const uint8_t* line = unit + 64 + 128 * (b % 8) + 16 * rr;
    store16(v + 32 * b, _mm_xor_si128(load16(line), flip));
    store16(v + 32 * b + 16, _mm_xor_si128(load16(line + 64), flip));
  }
}

// Row rr (< 4) of a Q4_K row group straight from the group, as unpack_row does for a row in the
// file's layout (restoring the row first cost the prefill GEMM 6 % at 128 rows).
INFERA_VNNI_TARGET void unpack_q4_k_group_row(const uint8_t* group, int64_t rr, int64_t k,
                                              uint8_t* v, float* scale, float* min) {
  const __m512i low4x64 = _mm512_set1_epi8(0x0F);
  // Dword i of a chunk pair's gather: chunk 2 pair + i / 8's dword i % 8 (index 4j + c, j = i % 8).
  alignas(64) static constexpr int32_t chunk_pair_idx[2][16] = {
      {0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29},
      {2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31}};
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* unit = group + b * kUnitBytes;
    uint16_t d16, dmin16;
    std::memcpy(&d16, unit + 2 * rr, 2);
    std::memcpy(&dmin16, unit + 8 + 2 * rr, 2);
    uint32_t words[3];  // word w of row rr at 16 + 16w + 4rr
    for (int w = 0; w < 3; ++w) std::memcpy(&words[w], unit + 16 + 16 * w + 4 * rr, 4);
    q4_k_scales_mins(words, quant::half_to_float(d16), quant::half_to_float(dmin16),
                     scale + 8 * b, min + 8 * b);
    // The row's 16 bytes of line j hold qs dwords 8c + j (c < 4): the 8 lines as 32 dwords
    // (index 4j + c), split into low and high nibbles, then chunk c's values (64 bytes: its low
    // nibbles, then its high ones, in qs order) gathered by one dword permute a pair of chunks.
    __m512i low[2], high[2];
    for (int h = 0; h < 2; ++h) {
      const __m512i lines = _mm512_inserti32x4(
          _mm512_inserti32x4(
              _mm512_inserti32x4(_mm512_castsi128_si512(load16(unit + 64 + 256 * h + 16 * rr)),
                                 load16(unit + 128 + 256 * h + 16 * rr), 1),
              load16(unit + 192 + 256 * h + 16 * rr), 2),
          load16(unit + 256 + 256 * h + 16 * rr), 3);
      low[h] = _mm512_and_si512(lines, low4x64);
      high[h] = _mm512_and_si512(_mm512_srli_epi16(lines, 4), low4x64);
    }
    for (int pair = 0; pair < 2; ++pair) {  // chunks 2 pair and 2 pair + 1
      const __m512i idx = _mm512_load_si512(chunk_pair_idx[pair]);
      const __m512i lo = _mm512_permutex2var_epi32(low[0], idx, low[1]);
      const __m512i hi = _mm512_permutex2var_epi32(high[0], idx, high[1]);
      _mm512_storeu_si512(v + 256 * b + 128 * pair, _mm512_shuffle_i64x2(lo, hi, 0x44));
      _mm512_storeu_si512(v + 256 * b + 128 * pair + 64, _mm512_shuffle_i64x2(lo, hi, 0xEE));
    }
  }
}

// Row rr (< 4) of a Q6_K row group straight from the group, as unpack_row does for a row in the
// file's layout: each 32-byte run of ql / qh the row-group unit keeps as two 16-byte pieces
// (segments s = 2 half and 2 half + 1), joined in one register (restoring the row first, the
// path before, cost ~2 % of a 128-token q4_k_m prefill).
INFERA_VNNI_TARGET void unpack_q6_k_group_row(const uint8_t* group, int64_t rr, int64_t k,
                                              uint8_t* v, float* scale) {
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* unit = group + b * kUnitBytesQ6_K;
    uint16_t d16;
    std::memcpy(&d16, unit + 64 + 2 * rr, 2);
    const float d = quant::half_to_float(d16);
    const auto* sc = reinterpret_cast<const int8_t*>(unit + 16 * rr);
    for (int s = 0; s < 16; ++s) scale[16 * b + s] = d * static_cast<float>(sc[s]);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* seg0 = unit + kQ6_KQuantsOffset + 192 * (2 * half) + 16 * rr;
      const uint8_t* seg1 = seg0 + 192;
      unpack_q6_k_half(load16x2(seg0, seg1), load16x2(seg0 + 64, seg1 + 64),
                       load16x2(seg0 + 128, seg1 + 128), v + 256 * b + 128 * half);
    }
  }
}

// Unpacks `rows` weight rows starting at w (the panel's first row, or its first row group) into
// the panel; missing rows (rows < 16) are zero.
INFERA_VNNI_TARGET void build_panel(const uint8_t* w, size_t row_bytes, DType t,
                                    WeightLayout layout, Format f, int64_t k, int64_t rows,
                                    Panel& p) {
  const int64_t nsb = k / f.sub;
  p.q.resize(static_cast<size_t>(16 * k));
  p.scale.assign(static_cast<size_t>(nsb * 16), 0.0f);
  p.min.assign(f.has_min ? static_cast<size_t>(nsb * 16) : 0, 0.0f);
  if (p.row_values.size() != static_cast<size_t>(16 * k) || rows < 16)
    p.row_values.assign(static_cast<size_t>(16 * k), 0);  // rows past `rows` stay zero
  p.row_scale.resize(static_cast<size_t>(nsb));
  p.row_min.resize(static_cast<size_t>(nsb));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* values = p.row_values.data() + r * k;
    if (layout == WeightLayout::Rows) {
      unpack_row(w + row_bytes * static_cast<size_t>(r), t, k, values, p.row_scale.data(),
                 p.row_min.data());
    } else if (t == DType::Q4_0) {
      unpack_q4_0_group_row(w + row_bytes * static_cast<size_t>(r / 4 * 4), r % 4, k, values,
                            p.row_scale.data());
    } else if (t == DType::Q8_0) {
      unpack_q8_0_group_row(w + row_bytes * static_cast<size_t>(r / 4 * 4), r % 4, k, values,
                            p.row_scale.data());
    } else if (t == DType::Q4_K) {
      unpack_q4_k_group_row(w + row_bytes * static_cast<size_t>(r / 4 * 4), r % 4, k, values,
                            p.row_scale.data(), p.row_min.data());
    } else {  // Q6_K
      unpack_q6_k_group_row(w + row_bytes * static_cast<size_t>(r / 4 * 4), r % 4, k, values,
                            p.row_scale.data());
    }
    for (int64_t sb = 0; sb < nsb; ++sb) {
      p.scale[static_cast<size_t>(16 * sb + r)] = p.row_scale[static_cast<size_t>(sb)];
      if (f.has_min) p.min[static_cast<size_t>(16 * sb + r)] = p.row_min[static_cast<size_t>(sb)];
    }
  }
  // k is a multiple of 32 (every type's block), so whole 8-dword columns.
  for (int64_t c = 0; c < k / 32; ++c)
    transpose_16x8(p.row_values.data() + 32 * c, k, p.q.data() + 512 * c);
}

// Activation rows [i0, i0 + R) x P panels' 16 rows each into out (16 columns per panel, panel q's
// at out + 16 q, the last panel's first `cols` stored).
template <int R, int P, int S, bool kMin>
INFERA_VNNI_TARGET void tile(const Panel* const* p, const Activations& a, int64_t k, int64_t nsb,
                             int64_t i0, float* out, int64_t ldo, __mmask16 cols) {
  constexpr int G = S / 4;
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < P; ++q) acc[r][q] = _mm512_setzero_ps();
  const int8_t* xq = a.qs.data() + i0 * k;
  const size_t a0 = static_cast<size_t>(i0 * nsb);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    // The R rows' dot products advance together, group by group: R x P independent vpdpbusd side
    // by side in program order, so the scheduler always holds enough of them to issue two per
    // cycle (row by row, each row's 8-long dependent chain filled the scheduler and capped the
    // GEMM near 40 % of the measured vpdpbusd peak). With P = 2 panels each activation broadcast
    // feeds two of them. Fully unrolled so dot[] and acc[] stay in registers (GCC otherwise keeps
    // them on the stack).
    __m512i dot[R][P];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i offset = _mm512_set1_epi32(a.offset[a0 + static_cast<size_t>(r * nsb + sb)]);
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q) dot[r][q] = offset;
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      __m512i wv[P];
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q) wv[q] = _mm512_loadu_si512(p[q]->q.data() + (sb * G + g) * 64);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, xq + r * k + sb * S + 4 * g, 4);
        const __m512i x4 = _mm512_set1_epi32(four);
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q) dot[r][q] = _mm512_dpbusd_epi32(dot[r][q], wv[q], x4);
      }
    }
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) {
      const __m512 scale = _mm512_loadu_ps(p[q]->scale.data() + 16 * sb);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const size_t at = a0 + static_cast<size_t>(r * nsb + sb);
        acc[r][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][q]),
                                    _mm512_mul_ps(scale, _mm512_set1_ps(a.d[at])), acc[r][q]);
        if constexpr (kMin)
          acc[r][q] = _mm512_fnmadd_ps(_mm512_loadu_ps(p[q]->min.data() + 16 * sb),
                                       _mm512_set1_ps(a.dsum[at]), acc[r][q]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q + 1 < P; ++q) _mm512_storeu_ps(out + r * ldo + 16 * q, acc[r][q]);
    _mm512_mask_storeu_ps(out + r * ldo + 16 * (P - 1), cols, acc[r][P - 1]);
  }
}

// Rows per register tile: 8 with one panel (8 + 8 accumulators and the 8 groups' operands), 6
// with two (12 + 12, two weight vectors and a broadcast; 6 x 2 measured ~1 % ahead of 4 x 2), 4
// with three (12 + 12, three weight vectors and a broadcast).
template <int P>
constexpr int kTileRowsOf = P == 1 ? kTileRows : P == 2 ? 6 : P == 3 ? 4 : 3;

template <int P, int S, bool kMin>
INFERA_VNNI_TARGET void panels_times_rows(const Panel* const* p, const Activations& a, int64_t n,
                                          int64_t k, float* out, int64_t ldo, __mmask16 cols) {
  const int64_t nsb = k / S;
  constexpr int T = kTileRowsOf<P>;
  int64_t i = 0;
  for (; i + T <= n; i += T) tile<T, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
  switch (n - i) {
    case 7:
      if constexpr (T > 7) return tile<7, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
      return;
    case 6:
      if constexpr (T > 6) return tile<6, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
      return;
    case 5:
      return tile<5, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 4:
      return tile<4, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 3:
      return tile<3, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 2:
      return tile<2, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 1:
      return tile<1, P, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    default:
      return;
  }
}

template <int P>
INFERA_VNNI_TARGET void panels_times_rows(const Panel* const* p, const Activations& a, Format f,
                                          int64_t n, int64_t k, float* out, int64_t ldo,
                                          __mmask16 cols) {
  if (f.has_min) {
    panels_times_rows<P, 32, true>(p, a, n, k, out, ldo, cols);
  } else if (f.sub == 32) {
    panels_times_rows<P, 32, false>(p, a, n, k, out, ldo, cols);
  } else {
    panels_times_rows<P, 16, false>(p, a, n, k, out, ldo, cols);
  }
}

// Panels per register tile: 3 by default (each activation broadcast feeds three vpdpbusd;
// x1.01-1.05 over two on the Zen 4 VM, bench/probes/int8_gemm_panels_probe.cpp), one with
// INFERA_CPU_INT8_PANEL_PAIRS=0; set_int8_panels_per_tile for A/Bs.
std::atomic<int>& panels_per_tile_setting() {
  static std::atomic<int> panels{[] {
    const char* e = std::getenv("INFERA_CPU_INT8_PANEL_PAIRS");
    return e && std::string(e) == "0" ? 1 : 3;
  }()};
  return panels;
}

}  // namespace

bool has_int8_gemm() {
  // F16C and FMA come with every AVX-512 CPU (and clang 14, the fuzz build's compiler, knows no
  // "f16c" for __builtin_cpu_supports).
  static const bool ok = __builtin_cpu_supports("avx512f") &&
                         __builtin_cpu_supports("avx512vnni") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

int int8_gemm_sub_block(DType wtype) { return format_of(wtype).sub; }

int int8_panels_per_tile() { return panels_per_tile_setting().load(); }
void set_int8_panels_per_tile(int panels) {
  if (panels < 1 || panels > 4)
    throw InvalidArgument("int8 GEMM panels per tile must be 1, 2 or 3, not " +
                          std::to_string(panels));
  panels_per_tile_setting().store(panels);
}

namespace {

// Formats that quantize x alike (the same sub-block, zero point and min): one quantization serves
// every weight of them.
bool same_format(Format a, Format b) {
  return a.sub == b.sub && a.zero_point == b.zero_point && a.has_min == b.has_min;
}

// The GEMM of one weight on activations already quantized in its format.
void gemm_quantized(ThreadPool& pool, const Activations& acts, Format f, int64_t n, int64_t k,
                    const void* w, DType wtype, int64_t m, float* out, WeightLayout layout);

// The calling thread's activations, reused across calls (read by every worker): a forward pass
// allocates nothing here once the largest activation has been seen.
Activations& caller_activations() {
  thread_local Activations acts;
  return acts;
}

}  // namespace

void matmul_quantized_int8_gemm(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                                const void* w, DType wtype, int64_t m, float* out,
                                WeightLayout layout) {
  const Format f = format_of(wtype);
  Activations& acts = caller_activations();
  quantize_activations(pool, x, n, k, f, acts);
  gemm_quantized(pool, acts, f, n, k, w, wtype, m, out, layout);
}

void matmul_quantized_int8_gemm_multi(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                                      const QuantMatmulJob* jobs, int64_t count) {
  Activations& acts = caller_activations();
  bool done[8] = {};
  if (count > 8) throw InvalidArgument("[matmul] at most 8 weights share one int8 GEMM input");
  for (int64_t i = 0; i < count; ++i) {  // each format's first job quantizes x for all of them
    if (done[i]) continue;
    const Format f = format_of(jobs[i].wtype);
    quantize_activations(pool, x, n, k, f, acts);
    for (int64_t j = i; j < count; ++j) {
      if (done[j] || !same_format(format_of(jobs[j].wtype), f)) continue;
      gemm_quantized(pool, acts, f, n, k, jobs[j].w, jobs[j].wtype, jobs[j].m, jobs[j].out,
                     jobs[j].layout);
      done[j] = true;
    }
  }
}

namespace {

void gemm_quantized(ThreadPool& pool, const Activations& acts, Format f, int64_t n, int64_t k,
                    const void* w, DType wtype, int64_t m, float* out, WeightLayout layout) {
  const size_t row_bytes = dtype_bytes(wtype, static_cast<size_t>(k));
  const int64_t panels = (m + kPanelRows - 1) / kPanelRows;
  const int64_t per_tile = panels_per_tile_setting().load();
  pool.parallel_for(panels, 1, [&](int64_t begin, int64_t end) {
    thread_local Panel panel[4];  // per thread, reused across calls
    const uint8_t* weights = static_cast<const uint8_t*>(w);
    for (int64_t pi = begin; pi < end;) {
      const int64_t j = pi * kPanelRows;
      const int64_t count = std::min(per_tile, end - pi);
      const int64_t rows = std::min(kPanelRows * count, m - j);
      // Row j (a multiple of 16) starts at the same byte in both layouts.
      for (int64_t q = 0; q < count; ++q)
        build_panel(weights + row_bytes * static_cast<size_t>(j + kPanelRows * q), row_bytes, wtype,
                    layout, f, k, std::min(kPanelRows, rows - kPanelRows * q), panel[q]);
      const auto cols = static_cast<__mmask16>((1u << (rows - kPanelRows * (count - 1))) - 1);
      const Panel* const p[4] = {&panel[0], &panel[1], &panel[2], &panel[3]};
      if (count == 4) {
        panels_times_rows<4>(p, acts, f, n, k, out + j, m, cols);
      } else if (count == 3) {
        panels_times_rows<3>(p, acts, f, n, k, out + j, m, cols);
      } else if (count == 2) {
        panels_times_rows<2>(p, acts, f, n, k, out + j, m, cols);
      } else {
        panels_times_rows<1>(p, acts, f, n, k, out + j, m, cols);
      }
      pi += count;
    }
  });
}

}  // namespace

}  // namespace infera::cpu
