// The residual GEMM (CudaOptions::residual_gemm; sm_90a): out += x . w^T into the f32 residual
// stream, on the TMA GEMM (tma_gemm.cuh).
//
// Why: cuBLAS's beta-1 GEMMs are the stack's weakest at prefill sizes (the o and down projections
// at a 2048-token Qwen3-0.6B prompt: 480-556 TFLOP/s in one wave of 128 x 128 tiles against
// 620-670 for q/k/v and gate/up, session 22's ncu), and an epilogue of our own is where the next
// fusions go (the next norm's row statistics). Each thread adds its accumulators into its f32
// pairs of the output (read, add, write: the same f32 sum as beta 1).
#include <cuda.h>

#include <cstring>

#include "backend/cuda/residual_gemm.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/tma_gemm.cuh"

namespace infera::cuda {
namespace residual_gemm {

template <int kCols>
struct ResidualEpilogue {
  static constexpr int kN = kCols, kSegments = 1;
  float* out;
  int m, n;

  __device__ void operator()(const gemm_schedule::Tile& tile, const float (&acc)[kN / 2], int row0,
                             int lane) const {
    const int col0 = tile.n0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      const int col = col0 + 8 * j;  // even, n even: col < n means col + 1 < n
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= m || col >= n) continue;
        float2* const p = reinterpret_cast<float2*>(out + static_cast<int64_t>(row) * n + col);
        float2 v = *p;
        v.x += acc[4 * j + 2 * h];
        v.y += acc[4 * j + 2 * h + 1];
        *p = v;
      }
    }
  }
};

}  // namespace residual_gemm

const char* residual_gemm_unsupported(const ResidualGemmArgs& a, int cc_major, int cc_minor) {
  if (const char* why =
          tma_gemm::operands_unsupported(cc_major, cc_minor, a.m, a.k, a.n, a.k, a.x, a.w, nullptr))
    return why;
  if (a.n % 2 != 0) return "n must be even (the output's f32 pairs)";
  if (reinterpret_cast<uintptr_t>(a.out) % 8 != 0) return "a misaligned output";
  return nullptr;
}

void launch_residual_gemm(const void* args, cudaStream_t stream) {
  ResidualGemmArgs a;
  std::memcpy(static_cast<void*>(&a), args, sizeof a);
  const int cols = a.schedule.pingpong ? 128
                                       : gemm_schedule::residual_tile_cols(
                                             a.m, a.n, a.schedule.sm_count, a.schedule.tile_cols);
  const CUtensorMap xmap = tma_gemm::x_map("residual_gemm", a.x, a.m, a.k, a.k);
  const CUtensorMap wmap = tma_gemm::w_map("residual_gemm", a.w, a.n, a.k, cols);
  const tma_gemm::Tiling tg = tma_gemm::tiling(a.m, a.n, cols, a.k);
  const int grid = tma_gemm::grid_for(tg, a.schedule.sm_count);
  const int m = static_cast<int>(a.m), n = static_cast<int>(a.n);
  using residual_gemm::ResidualEpilogue;
  if (a.schedule.pingpong)
    return tma_gemm::launch<ResidualEpilogue<128>, true>({a.out, m, n}, tg, xmap, wmap, wmap, grid,
                                                         stream);
  if (cols == 256)
    return tma_gemm::launch<ResidualEpilogue<256>, false>({a.out, m, n}, tg, xmap, wmap, wmap, grid,
                                                          stream);
  tma_gemm::launch<ResidualEpilogue<128>, false>({a.out, m, n}, tg, xmap, wmap, wmap, grid, stream);
}

}  // namespace infera::cuda
