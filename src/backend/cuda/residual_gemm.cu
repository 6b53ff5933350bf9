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

  // Every load of a part before its stores: a store to `out` may alias any later load of it for
  // all the compiler knows, so a load issued after one waits for nothing but is not issued before
  // it either, and an interleaved load / add / store walk would take a memory latency a pair.
  // Parts of at most 16 column groups (64 registers of old values beside the accumulators).
  static constexpr int kPart = kCols / 8 < 16 ? kCols / 8 : 16;

  __device__ void operator()(const gemm_schedule::Tile& tile, const float (&acc)[kN / 2], int row0,
                             int lane) const {
    const int col0 = tile.n0 + 2 * (lane % 4);
#pragma unroll
    for (int j0 = 0; j0 < kCols / 8; j0 += kPart) {
      float2 old[kPart][2];
#pragma unroll
      for (int j = 0; j < kPart; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + 8 * h, col = col0 + 8 * (j0 + j);  // col even, n even
          old[j][h] =
              row < m && col < n
                  ? *reinterpret_cast<const float2*>(out + static_cast<int64_t>(row) * n + col)
                  : make_float2(0.0f, 0.0f);
        }
#pragma unroll
      for (int j = 0; j < kPart; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + 8 * h, col = col0 + 8 * (j0 + j);
          if (row >= m || col >= n) continue;
          const int a = 4 * (j0 + j) + 2 * h;
          *reinterpret_cast<float2*>(out + static_cast<int64_t>(row) * n + col) =
              make_float2(old[j][h].x + acc[a], old[j][h].y + acc[a + 1]);
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
