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
#include <cstring>
#include <vector>

#include "backend/cpu/simd_kernels.h"  // kPanelRows, the split every matmul path hands out
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

// One unpacked panel: q[(sb * groups + g) * 64 + 4 * r + t] = byte of row r, element
// sb * sub + 4 * g + t; scale / min[sb * 16 + r].
struct Panel {
  std::vector<uint8_t> q;
  std::vector<float> scale, min;
  std::vector<uint8_t> row_values;  // one row's bytes while unpacking
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

// One weight row to unsigned bytes (value + zero_point) and per-sub-block scales / mins, with the
// reference dequantizer's scale products (d * sc, dmin * m in f32).
void unpack_row(const uint8_t* src, DType t, int64_t k, uint8_t* v, float* scale, float* min) {
  switch (t) {
    case DType::Q8_0:
      for (int64_t b = 0; b < k / 32; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ8_0*>(src)[b];
        scale[b] = quant::half_to_float(blk.d);
        for (int i = 0; i < 32; ++i) v[32 * b + i] = static_cast<uint8_t>(blk.qs[i] ^ 0x80);
      }
      return;
    case DType::Q4_0:
      for (int64_t b = 0; b < k / 32; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ4_0*>(src)[b];
        scale[b] = quant::half_to_float(blk.d);
        for (int i = 0; i < 16; ++i) {
          v[32 * b + i] = blk.qs[i] & 0xF;
          v[32 * b + 16 + i] = blk.qs[i] >> 4;
        }
      }
      return;
    case DType::Q4_K:
      for (int64_t b = 0; b < k / 256; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ4_K*>(src)[b];
        const float d = quant::half_to_float(blk.d), dmin = quant::half_to_float(blk.dmin);
        for (int s = 0; s < 8; ++s) {
          uint8_t sc, mn;
          quant::q4_k_scale_min(s, blk.scales, sc, mn);
          scale[8 * b + s] = d * static_cast<float>(sc);
          min[8 * b + s] = dmin * static_cast<float>(mn);
          const uint8_t* q = blk.qs + 32 * (s / 2);
          const int shift = 4 * (s % 2);
          for (int l = 0; l < 32; ++l) v[256 * b + 32 * s + l] = (q[l] >> shift) & 0xF;
        }
      }
      return;
    default:  // Q6_K
      for (int64_t b = 0; b < k / 256; ++b) {
        const auto& blk = reinterpret_cast<const quant::BlockQ6_K*>(src)[b];
        const float d = quant::half_to_float(blk.d);
        for (int s = 0; s < 16; ++s) scale[16 * b + s] = d * static_cast<float>(blk.scales[s]);
        for (int half = 0; half < 2; ++half) {
          const uint8_t* ql = blk.ql + 64 * half;
          const uint8_t* qh = blk.qh + 32 * half;
          for (int g = 0; g < 4; ++g) {
            const uint8_t* low = ql + 32 * (g & 1);
            const int low_shift = 4 * (g >> 1), high_shift = 2 * g;
            uint8_t* dst = v + 256 * b + 128 * half + 32 * g;
            for (int l = 0; l < 32; ++l)
              dst[l] = static_cast<uint8_t>(((low[l] >> low_shift) & 0xF) |
                                            (((qh[l] >> high_shift) & 3) << 4));
          }
        }
      }
      return;
  }
}

// Unpacks weight rows [j0, j0 + rows) into the panel; missing rows (rows < 16) are zero.
void build_panel(const uint8_t* w, size_t row_bytes, DType t, Format f, int64_t k, int64_t j0,
                 int64_t rows, Panel& p) {
  const int64_t nsb = k / f.sub, groups = f.sub / 4;
  p.q.assign(static_cast<size_t>(nsb * groups * 64), 0);
  p.scale.assign(static_cast<size_t>(nsb * 16), 0.0f);
  p.min.assign(f.has_min ? static_cast<size_t>(nsb * 16) : 0, 0.0f);
  p.row_values.resize(static_cast<size_t>(k));
  p.row_scale.resize(static_cast<size_t>(nsb));
  p.row_min.resize(static_cast<size_t>(nsb));
  for (int64_t r = 0; r < rows; ++r) {
    unpack_row(w + row_bytes * static_cast<size_t>(j0 + r), t, k, p.row_values.data(),
               p.row_scale.data(), p.row_min.data());
    const uint8_t* v = p.row_values.data();
    uint8_t* dst = p.q.data() + 4 * r;
    for (int64_t g = 0; g < nsb * groups; ++g) std::memcpy(dst + 64 * g, v + 4 * g, 4);
    for (int64_t sb = 0; sb < nsb; ++sb) {
      p.scale[static_cast<size_t>(16 * sb + r)] = p.row_scale[static_cast<size_t>(sb)];
      if (f.has_min) p.min[static_cast<size_t>(16 * sb + r)] = p.row_min[static_cast<size_t>(sb)];
    }
  }
}

// Activation rows [i0, i0 + R) x the panel's 16 rows into out (16 columns, the first `cols`
// stored).
template <int R, int S, bool kMin>
INFERA_VNNI_TARGET void tile(const Panel& p, const Activations& a, int64_t k, int64_t nsb,
                             int64_t i0, float* out, int64_t ldo, __mmask16 cols) {
  constexpr int G = S / 4;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const int8_t* xq = a.qs.data() + i0 * k;
  const size_t a0 = static_cast<size_t>(i0 * nsb);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    __m512i wv[G];
    const uint8_t* pq = p.q.data() + sb * G * 64;
    for (int g = 0; g < G; ++g) wv[g] = _mm512_loadu_si512(pq + 64 * g);
    const __m512 scale = _mm512_loadu_ps(p.scale.data() + 16 * sb);
    for (int r = 0; r < R; ++r) {
      const int8_t* xs = xq + r * k + sb * S;
      const size_t at = a0 + static_cast<size_t>(r * nsb + sb);
      __m512i dot = _mm512_set1_epi32(a.offset[at]);
      for (int g = 0; g < G; ++g) {
        int32_t four;
        std::memcpy(&four, xs + 4 * g, 4);
        dot = _mm512_dpbusd_epi32(dot, wv[g], _mm512_set1_epi32(four));
      }
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                               _mm512_mul_ps(scale, _mm512_set1_ps(a.d[at])), acc[r]);
      if constexpr (kMin)
        acc[r] = _mm512_fnmadd_ps(_mm512_loadu_ps(p.min.data() + 16 * sb),
                                  _mm512_set1_ps(a.dsum[at]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(out + r * ldo, cols, acc[r]);
}

template <int S, bool kMin>
INFERA_VNNI_TARGET void panel_times_rows(const Panel& p, const Activations& a, int64_t n, int64_t k,
                                         float* out, int64_t ldo, __mmask16 cols) {
  const int64_t nsb = k / S;
  int64_t i = 0;
  for (; i + kTileRows <= n; i += kTileRows)
    tile<kTileRows, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
  switch (n - i) {
    case 7:
      return tile<7, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 6:
      return tile<6, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 5:
      return tile<5, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 4:
      return tile<4, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 3:
      return tile<3, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 2:
      return tile<2, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    case 1:
      return tile<1, S, kMin>(p, a, k, nsb, i, out + i * ldo, ldo, cols);
    default:
      return;
  }
}

}  // namespace

bool has_int8_gemm() {
  static const bool ok = __builtin_cpu_supports("avx512vnni") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c") &&
                         __builtin_cpu_supports("fma");
  return ok;
}

int int8_gemm_sub_block(DType wtype) { return format_of(wtype).sub; }

void matmul_quantized_int8_gemm(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                                const void* w, DType wtype, int64_t m, float* out) {
  const Format f = format_of(wtype);
  // Reused across calls by the calling thread (read by every worker): a forward pass allocates
  // nothing here once the largest activation has been seen.
  thread_local Activations caller_acts;
  const Activations& acts = caller_acts;  // a name the workers capture (not their own instance)
  quantize_activations(pool, x, n, k, f, caller_acts);
  const size_t row_bytes = dtype_bytes(wtype, static_cast<size_t>(k));
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t panels = (m + kPanelRows - 1) / kPanelRows;
  pool.parallel_for(panels, 1, [&](int64_t begin, int64_t end) {
    thread_local Panel panel;  // one per thread, reused across calls
    for (int64_t pi = begin; pi < end; ++pi) {
      const int64_t j = pi * kPanelRows, rows = std::min(kPanelRows, m - j);
      build_panel(wb, row_bytes, wtype, f, k, j, rows, panel);
      const auto cols = static_cast<__mmask16>((1u << rows) - 1);
      if (f.has_min) {
        panel_times_rows<32, true>(panel, acts, n, k, out + j, m, cols);
      } else if (f.sub == 32) {
        panel_times_rows<32, false>(panel, acts, n, k, out + j, m, cols);
      } else {
        panel_times_rows<16, false>(panel, acts, n, k, out + j, m, cols);
      }
    }
  });
}

}  // namespace infera::cpu
