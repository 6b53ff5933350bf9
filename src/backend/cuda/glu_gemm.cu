// The GLU GEMM (CudaOptions::glu_gemm; sm_90a): out = act(x . w0^T) * (x . w1^T) for prefill-sized
// x, the gated unit in the epilogue of the TMA GEMM (tma_gemm.cuh).
//
// Why: cuBLAS has no such epilogue, so the gate/up products went out as two bf16 [m, f] matrices
// and a SwiGLU / GeGLU kernel read them back: at a 2048-token Qwen3-0.6B prompt ~13 us a layer of
// the gate/up GEMM's ~40 (session 22's ncu), 136 us a layer of ModernBERT-large 64x512 (session
// 14), and one launch of the ~8 a layer that bound its 93-token forward.
//
// A stage holds w0's tile_cols rows and then w1's, so one wgmma of N = 2 x tile_cols computes both
// products, and each thread holds a column's w0 and w1 results tile_cols / 2 accumulators apart:
// the epilogue is act(a) * b per pair, stored straight from registers.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstring>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/glu_gemm.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/tma_gemm.cuh"

namespace infera::cuda {
namespace glu_gemm {

// SwiGLU with the hardware's exp2 and reciprocal: the epilogue is not overlapped with the tensor
// cores (the consumers compute it between tiles), and expf plus an IEEE division are ~25
// instructions an output, ~half the mainloop's time at k = 1024; these are ~6, a few ulp off
// (__fdividef's 0 for a denominator past 2^126 is silu's limit there). GeGLU keeps the exact erf
// GELU of device_util.cuh's GegluOp.
template <int kAct>
__device__ __forceinline__ float glu(float a, float b) {
  if constexpr (kAct == kGluGemmSilu) return __fdividef(a, 1.0f + __expf(-a)) * b;
  return gelu_erf(a) * b;
}

template <int kCols, int kAct>
struct GluEpilogue {
  static constexpr int kN = 2 * kCols, kSegments = 2;  // w0's tile rows, then w1's
  __nv_bfloat16* out_bf16;
  float* out_f32;
  int m, f;
  int pairs;  // f even: a lane's two adjacent columns are stored together

  __device__ void store(int row, int col, float y0, float y1) const {
    const int64_t at = static_cast<int64_t>(row) * f + col;
    if (pairs) {  // col even, f even: col < f means col + 1 < f
      if (col >= f) return;
      if (out_f32) *reinterpret_cast<float2*>(out_f32 + at) = make_float2(y0, y1);
      if (out_bf16)
        *reinterpret_cast<__nv_bfloat162*>(out_bf16 + at) = __floats2bfloat162_rn(y0, y1);
      return;
    }
    for (int i = 0; i < 2 && col + i < f; ++i) {
      const float y = i == 0 ? y0 : y1;
      if (out_f32) out_f32[at + i] = y;
      if (out_bf16) out_bf16[at + i] = __float2bfloat16_rn(y);
    }
  }

  // w1's column groups are kCols / 8 after w0's: acc index + kCols / 2.
  __device__ void operator()(const gemm_schedule::Tile& tile, const float (&acc)[kN / 2], int row0,
                             int lane) const {
    const int col0 = tile.n0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int a = 4 * j + 2 * h, b = a + kCols / 2;
        const int row = row0 + 8 * h;
        if (row < m)
          store(row, col0 + 8 * j, glu<kAct>(acc[a], acc[b]), glu<kAct>(acc[a + 1], acc[b + 1]));
      }
    }
  }
};

template <int kCols, int kAct, bool kPingPong>
void launch(const GluGemmArgs& a, const tma_gemm::Tiling& tg, const CUtensorMap& xmap,
            const CUtensorMap& w0map, const CUtensorMap& w1map, int grid, cudaStream_t stream) {
  const GluEpilogue<kCols, kAct> epi{static_cast<__nv_bfloat16*>(a.out_bf16), a.out_f32,
                                     static_cast<int>(a.m), static_cast<int>(a.f),
                                     a.f % 2 == 0 ? 1 : 0};
  tma_gemm::launch<GluEpilogue<kCols, kAct>, kPingPong>(epi, tg, xmap, w0map, w1map, grid, stream);
}

}  // namespace glu_gemm

const char* glu_gemm_unsupported(const GluGemmArgs& a, int cc_major, int cc_minor) {
  if (const char* why =
          tma_gemm::operands_unsupported(cc_major, cc_minor, a.m, a.k, a.f, a.ldx, a.x, a.w0, a.w1))
    return why;
  if (a.act != kGluGemmSilu && a.act != kGluGemmGelu) return "an unknown activation";
  if (!a.out_bf16 && !a.out_f32) return "no output";
  if ((a.out_f32 && reinterpret_cast<uintptr_t>(a.out_f32) % 8 != 0) ||
      (a.out_bf16 && reinterpret_cast<uintptr_t>(a.out_bf16) % 4 != 0))
    return "a misaligned output";
  return nullptr;
}

void launch_glu_gemm(const void* args, cudaStream_t stream) {
  GluGemmArgs a;
  std::memcpy(static_cast<void*>(&a), args, sizeof a);
  const int cols = a.schedule.pingpong ? 64
                                       : gemm_schedule::glu_tile_cols(a.m, a.f, a.schedule.sm_count,
                                                                      a.schedule.tile_cols);
  const CUtensorMap xmap = tma_gemm::x_map("glu_gemm", a.x, a.m, a.k, a.ldx);
  const CUtensorMap w0map = tma_gemm::w_map("glu_gemm", a.w0, a.f, a.k, cols);
  const CUtensorMap w1map = tma_gemm::w_map("glu_gemm", a.w1, a.f, a.k, cols);
  const tma_gemm::Tiling tg = tma_gemm::tiling(a.m, a.f, cols, a.k);
  const int grid = tma_gemm::grid_for(tg, a.schedule.sm_count);
  using glu_gemm::launch;
  const bool gelu = a.act == kGluGemmGelu;
  if (a.schedule
          .pingpong)  // (64 columns: w0's and w1's rows make the 128 a warpgroup's tile holds)
    return gelu ? launch<64, kGluGemmGelu, true>(a, tg, xmap, w0map, w1map, grid, stream)
                : launch<64, kGluGemmSilu, true>(a, tg, xmap, w0map, w1map, grid, stream);
  if (cols == 128)
    return gelu ? launch<128, kGluGemmGelu, false>(a, tg, xmap, w0map, w1map, grid, stream)
                : launch<128, kGluGemmSilu, false>(a, tg, xmap, w0map, w1map, grid, stream);
  gelu ? launch<64, kGluGemmGelu, false>(a, tg, xmap, w0map, w1map, grid, stream)
       : launch<64, kGluGemmSilu, false>(a, tg, xmap, w0map, w1map, grid, stream);
}

}  // namespace infera::cuda
