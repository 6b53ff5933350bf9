// Host side of stream_gemm.cuh: tensor maps, the split-k layout and the launch (cluster + PDL
// attributes). Included by exactly one .cu per binary (it instantiates the kernels).
#pragma once

#include <algorithm>
#include <cstdio>

#include "backend/cuda/stream_gemm.cuh"
#include "backend/cuda/tensor_map.h"

namespace infera::cuda::sgemm {

// Stages, 2..6: as many as fit kCtaSmemBudget beside the split-k receive buffer, else as many
// as fit it with the buffer over the ring.
template <int NT, int WG>
constexpr int kStagesFor = [] {
  constexpr int stage = WG * kRowsPerWG * kBK * 2 + NT * kBK * 2;
  constexpr int recv = StreamLayout<NT, WG, 2>::kRecvBytes;
  return kCtaSmemBudget - recv >= 2 * stage ? std::min(6, (kCtaSmemBudget - recv) / stage)
                                            : std::clamp(kCtaSmemBudget / stage, 2, 6);
}();

// Weight rows per CTA / 64 when the caller leaves it open: 2 (one x tile feeds 128 weight rows)
// for 64..128 rows of x on weights of <= 1024 rows, where the probe measured it faster; else 1.
inline int default_wg(int nt, int64_t m) { return nt >= 64 && nt <= 128 && m <= 1024 ? 2 : 1; }

inline int padded_rows(int n) {
  constexpr int kSizes[] = {8, 16, 24, 32, 48, 64, 96, 128, 192, 256};
  for (int s : kSizes)
    if (n <= s) return s;
  return -1;
}

// A bf16 row-major [rows, cols] matrix with row stride `ld` elements, read in boxes of
// box_rows x kBK with 128-byte swizzle; out-of-bounds elements read as zero.
inline bool encode_bf16_map(CUtensorMap* map, const void* base, int64_t rows, int64_t cols,
                            int64_t ld, int box_rows) {
  return encode_2d_map(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, rows, cols, ld, kBK, box_rows);
}

struct StreamGemmProblem {
  const __nv_bfloat16* w[kMaxSegments];  // [m[i], k], row stride k
  float* out[kMaxSegments];              // [n, m[i]], row stride ldo[i]
  int64_t m[kMaxSegments];
  int64_t ldo[kMaxSegments];
  int segments;
  const __nv_bfloat16* x;  // [n, k], row stride ldx
  int64_t n, k, ldx;
  // kGluSilu: segments == 2, m[0] == m[1], out[0] = silu(w0 x) * (w1 x); kGluGelu: gelu(w0 x) *
  // (w1 x). out[0] may then be null when out_bf16 is set.
  int glu = 0;
  __nv_bfloat16* out_bf16 = nullptr;  // glu: out[0] as bf16, [n, m[0]] (optional)
};

inline StreamGemmProblem single_problem(const __nv_bfloat16* w, const __nv_bfloat16* x, float* out,
                                        int64_t n, int64_t m, int64_t k, int64_t ldx, int64_t ldo) {
  StreamGemmProblem q{};
  q.w[0] = w;
  q.out[0] = out;
  q.m[0] = m;
  q.ldo[0] = ldo;
  q.segments = 1;
  q.x = x;
  q.n = n;
  q.k = k;
  q.ldx = ldx;
  return q;
}

// Why a problem cannot take this kernel, or nullptr.
inline const char* stream_gemm_unsupported(const StreamGemmProblem& q) {
  if (q.n < 1 || q.n > 256) return "n outside 1..256";
  if (q.segments < 1 || q.segments > kMaxSegments) return "1..3 weights";
  if (q.glu && (q.segments != 2 || q.m[0] != q.m[1] || q.n > 128))
    return "glu needs two weights of one shape and n <= 128";
  if (q.glu != 0 && q.glu != kGluSilu && q.glu != kGluGelu) return "unknown glu";
  if (q.glu && !q.out[0] && !q.out_bf16) return "no output";
  if (q.k < 1 || q.k > (int64_t{1} << 30)) return "k out of range";
  if (q.k % 8 != 0 || q.ldx % 8 != 0 || q.ldx < q.k) return "k or ldx not a multiple of 8";
  uintptr_t bits = reinterpret_cast<uintptr_t>(q.x);
  for (int i = 0; i < q.segments; ++i) {
    if (q.m[i] < 1 || q.m[i] > (int64_t{1} << 30)) return "m out of range";
    if (q.ldo[i] < q.m[i]) return "ldo < m";
    if (!q.out[i] && !q.glu) return "no output";
    bits |= reinterpret_cast<uintptr_t>(q.w[i]);
  }
  if (bits % 16 != 0) return "w or x not 16-byte aligned";
  if (!encode_tiled_fn()) return "no cuTensorMapEncodeTiled";
  return nullptr;
}

template <int NT, int WG>
cudaError_t launch_stream_gemm_t(const StreamGemmProblem& q, int sm_count, bool pdl,
                                 cudaStream_t stream, int* splits_out) {
  constexpr int kStages = kStagesFor<NT, WG>;
  using L = StreamLayout<NT, WG, kStages>;
  auto kernel = stream_gemm_kernel<NT, WG, kStages>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const int rows_per_tile = (q.glu ? 1 : WG) * kRowsPerWG;
  StreamMaps maps;
  StreamGemmParams p{};
  int tiles = 0;
  bool vec = true;
  for (int i = 0; i < kMaxSegments; ++i) {
    const int s = i < q.segments ? i : 0;
    if (!encode_bf16_map(&maps.w[i], q.w[s], q.m[s], q.k, q.k, rows_per_tile))
      return cudaErrorInvalidValue;
    p.out[i] = q.out[s];
    p.ldo[i] = q.ldo[s];
    p.m[i] = static_cast<int>(q.m[s]);
    if (i < q.segments && !(q.glu && i == 1))
      tiles += static_cast<int>((q.m[s] + rows_per_tile - 1) / rows_per_tile);
    p.tile_end[i] = tiles;
    vec = vec && q.ldo[s] % 4 == 0 && reinterpret_cast<uintptr_t>(q.out[s]) % 16 == 0;
  }
  if (!encode_bf16_map(&maps.x, q.x, q.n, q.k, q.ldx, NT)) return cudaErrorInvalidValue;
  const int k_chunks = static_cast<int>((q.k + kBK - 1) / kBK);
  // Splits: about one wave of CTAs, no empty split, and every rank's partial rows inside the
  // receive buffer (s ranks x rows_per rows, rows_per = n / s rounded up to 8; one split
  // always fits).
  int splits = std::clamp(sm_count / tiles, 1, std::min(kMaxSplits, k_chunks));
  int per = 0;
  for (;;) {
    per = (k_chunks + splits - 1) / splits;
    splits = (k_chunks + per - 1) / per;
    const int rows_per = (static_cast<int>((q.n + splits - 1) / splits) + 7) / 8 * 8;
    if (splits == 1 || splits * rows_per <= L::kRecvRows) break;
    --splits;
  }
  if (splits_out) *splits_out = splits;
  p.out_bf16 = q.glu ? q.out_bf16 : nullptr;
  p.n = static_cast<int>(q.n);
  p.glu = q.glu;
  p.k_chunks = k_chunks;
  p.chunks_per_split = per;
  p.vec_out = vec ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(tiles, splits, 1);
  cfg.blockDim = dim3(L::kThreads, 1, 1);
  cfg.dynamicSmemBytes = L::kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2];
  int na = 0;
  attrs[na].id = cudaLaunchAttributeClusterDimension;
  attrs[na].val.clusterDim.x = 1;
  attrs[na].val.clusterDim.y = splits;
  attrs[na].val.clusterDim.z = 1;
  ++na;
  if (pdl) {
    attrs[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = na;
  return cudaLaunchKernelEx(&cfg, kernel, maps, p);
}

// Weight rows per CTA / 64 when the caller leaves it open (run 2's probe, with PDL): 2 only for
// up to 16 rows of x on weights whose 64-row tiles alone give under 3 CTAs per SM (gate/up:
// 3.1-3.7 us against 3.7-4.1); else 1 (q at 64 rows: 5.2 us against 9.0).
inline int default_wg(int nt, int64_t tiles64, int sm_count) {
  return nt <= 16 && sm_count < 3 * tiles64 ? 2 : 1;
}

// wg: weight rows per CTA / 64 (1 or 2; 1 past 128 rows of x); 0 picks (default_wg). glu always
// takes 2 (gate and up tiles side by side).
inline cudaError_t launch_stream_gemm(const StreamGemmProblem& q, int sm_count, int wg, bool pdl,
                                      cudaStream_t stream, int* splits_out = nullptr) {
  if (stream_gemm_unsupported(q)) return cudaErrorInvalidValue;
  const int nt = padded_rows(static_cast<int>(q.n));
  int64_t tiles64 = 0;
  for (int i = 0; i < q.segments; ++i) tiles64 += (q.m[i] + kRowsPerWG - 1) / kRowsPerWG;
  if (wg == 0) wg = default_wg(nt, tiles64, sm_count);
  if (q.glu) wg = 2;
  if (nt > 128) wg = 1;  // 2 x 64 rows x 256 x rows of partials would not fit the budget
#define INFERA_SGEMM_CASE(NTV)                                         \
  case NTV:                                                            \
    return wg == 2 && NTV <= 128                                       \
           ? launch_stream_gemm_t < NTV,                               \
           NTV <= 128 ? 2 : 1 > (q, sm_count, pdl, stream, splits_out) \
           : launch_stream_gemm_t<NTV, 1>(q, sm_count, pdl, stream, splits_out);
  switch (nt) {
    INFERA_SGEMM_CASE(8)
    INFERA_SGEMM_CASE(16)
    INFERA_SGEMM_CASE(24)
    INFERA_SGEMM_CASE(32)
    INFERA_SGEMM_CASE(48)
    INFERA_SGEMM_CASE(64)
    INFERA_SGEMM_CASE(96)
    INFERA_SGEMM_CASE(128)
    INFERA_SGEMM_CASE(192)
    INFERA_SGEMM_CASE(256)
    default:
      return cudaErrorInvalidValue;
  }
#undef INFERA_SGEMM_CASE
}

}  // namespace infera::cuda::sgemm
