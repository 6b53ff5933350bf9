// Highway 1.0.3 (Debian 12) has no bf16 or u8 x s8 dot-product op, so these loops use the AVX-512
// intrinsics directly, compiled for that target only (as src/backend/cpu/matmul_bf16_dot.cpp).
#include "bench/dot_kernels.h"

#include <immintrin.h>

#include "infera/error.h"

#define INFERA_DOT_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni")))

namespace infera::bench {
namespace {

// acc <- acc + a . b over pairs: +0.25 per step, so the sums stay finite and normal however long
// the loop runs (f32 rounding stops their growth near 2^24, far from overflow).
INFERA_DOT_TARGET double bf16_chains(int64_t iterations, float seed) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.25f), _mm512_set1_ps(0.25f));
  __m512 acc[kDotAccumulators];
  for (int i = 0; i < kDotAccumulators; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  for (int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < kDotAccumulators; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 total = _mm512_setzero_ps();
  for (int i = 0; i < kDotAccumulators; ++i) total = _mm512_add_ps(total, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, total);
  double sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// acc <- acc + sum of 4 u8 x s8 products per lane: 4 * 1 * 1 per step, int32 wraps only after
// 2^29 iterations (the probe runs far fewer).
INFERA_DOT_TARGET double int8_chains(int64_t iterations, float seed) {
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
  __m512i acc[kDotAccumulators];
  for (int i = 0; i < kDotAccumulators; ++i) acc[i] = _mm512_set1_epi32(static_cast<int>(seed) + i);
  for (int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < kDotAccumulators; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i total = _mm512_setzero_si512();
  for (int i = 0; i < kDotAccumulators; ++i) total = _mm512_add_epi32(total, acc[i]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, total);
  double sum = 0;
  for (int32_t v : lanes) sum += v;
  return sum;
}

}  // namespace

const char* dot_kind_name(DotKind kind) {
  switch (kind) {
    case DotKind::F32Fma:
      return "f32 FMA";
    case DotKind::Bf16Dot:
      return "bf16 dot (vdpbf16ps)";
    case DotKind::Int8Dot:
      return "int8 dot (vpdpbusd)";
  }
  return "?";
}

bool dot_kind_supported(DotKind kind) {
  switch (kind) {
    case DotKind::F32Fma:
      return true;
    case DotKind::Bf16Dot:
      return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
    case DotKind::Int8Dot:
      return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  }
  return false;
}

double dot_flops_per_instruction(DotKind kind) {
  switch (kind) {
    case DotKind::F32Fma:
      return 0;  // not a dot instruction: fma_chains (machine_kernels.h) measures f32
    case DotKind::Bf16Dot:
      return 64;
    case DotKind::Int8Dot:
      return 128;
  }
  return 0;
}

double dot_chains(DotKind kind, int64_t iterations, float seed) {
  if (kind == DotKind::F32Fma || !dot_kind_supported(kind))
    throw InvalidArgument(std::string("dot_chains: ") + dot_kind_name(kind) +
                          " chains are not available on this CPU");
  return kind == DotKind::Bf16Dot ? bf16_chains(iterations, seed) : int8_chains(iterations, seed);
}

}  // namespace infera::bench
