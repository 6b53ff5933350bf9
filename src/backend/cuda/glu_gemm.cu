// The GLU GEMM (CudaOptions::glu_gemm; sm_90a): out = act(x . w0^T) * (x . w1^T) for prefill-sized
// x, the gated unit in the GEMM's epilogue.
//
// Why: cuBLAS has no such epilogue, so the gate/up products went out as two bf16 [m, f] matrices
// and a SwiGLU / GeGLU kernel read them back: at a 2048-token Qwen3-0.6B prompt ~13 us a layer of
// the gate/up GEMM's ~40 (session 22's ncu), 136 us a layer of ModernBERT-large 64x512 (session
// 14), and one launch of the ~8 a layer that bound its 93-token forward.
//
// The structure is the TMA attention's (attention_tma_wgmma.cu), on a GEMM:
//   - a persistent grid, a block an SM, walks 128-row x tile_cols-column output tiles in bands
//     (glu_gemm_schedule.h);
//   - one producer thread copies each 64-wide k block of the tile's x rows and of both weights'
//     rows with TMA (128-byte swizzle) into a ring of stages guarded by mbarriers, running ahead
//     into the next tile while the consumers finish this one;
//   - two consumer warpgroups own 64 rows each. A stage holds w0's tile_cols rows and then w1's,
//     so one wgmma of N = 2 x tile_cols computes both products, and each thread holds a column's
//     w0 and w1 results in registers tile_cols / 2 accumulators apart: the epilogue is
//     act(a) * b per pair, stored straight from registers.
// x and the weights are K-major (the Hugging Face [out, in] layout): both wgmma operands from
// shared memory without transposes. Zero fill of the TMA boxes covers m, f and k past the tiles.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/glu_gemm.h"
#include "backend/cuda/glu_gemm_schedule.h"
#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/stream_gemm_wgmma.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma.cuh"

namespace infera::cuda {
namespace glu_gemm {

constexpr int kBK = 64;  // k a stage: 64 bf16 = 128 bytes, one swizzled row
constexpr int kRows = glu_schedule::kTileRows;
constexpr int kConsumers = 256;             // warpgroups 0 and 1
constexpr int kThreads = kConsumers + 128;  // warpgroup 2: the producer's (one thread works)
// As the TMA attention's: the producer gives its registers to the consumers (2 x tile_cols / 2
// accumulators a thread), and the sum stays within the block's allocation at launch (168 x 384 at
// one block an SM), or setmaxnreg.inc would wait forever.
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
static_assert(kProducerRegs * (kThreads - kConsumers) + kConsumerRegs * kConsumers <=
                  65536 / kThreads / 8 * 8 * kThreads,
              "setmaxnreg would wait for more registers than the block holds");
constexpr int kRingBytes = 192 * 1024;  // of an SM's 227 KB

template <int kCols>
struct Layout {
  static constexpr int kN = 2 * kCols;                        // wgmma N: w0's rows, then w1's
  static constexpr int kABytes = kRows * kBK * 2;             // x: 128 rows
  static constexpr int kWBytes = kCols * kBK * 2;             // one weight's rows
  static constexpr int kStageBytes = kABytes + 2 * kWBytes;   // a multiple of the 1024-byte atom
  static constexpr int kStages = kRingBytes / kStageBytes;    // 4 at 128 columns, 6 at 64
  static constexpr int kSmem = kStages * kStageBytes + 1024;  // + alignment slack
};

struct Params {
  __nv_bfloat16* out_bf16;
  float* out_f32;
  int m, f, k_blocks, tiles;
  int pairs;  // f even: a lane's two adjacent columns are stored together
};

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

template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void store(const Params& p, int row, int col, float y0, float y1) {
  const int64_t at = static_cast<int64_t>(row) * p.f + col;
  if (p.pairs) {  // col even, f even: col < f means col + 1 < f
    if (col >= p.f) return;
    if (p.out_f32) *reinterpret_cast<float2*>(p.out_f32 + at) = make_float2(y0, y1);
    if (p.out_bf16)
      *reinterpret_cast<__nv_bfloat162*>(p.out_bf16 + at) = __floats2bfloat162_rn(y0, y1);
    return;
  }
  for (int i = 0; i < 2 && col + i < p.f; ++i) {
    const float y = i == 0 ? y0 : y1;
    if (p.out_f32) p.out_f32[at + i] = y;
    if (p.out_bf16) p.out_bf16[at + i] = __float2bfloat16_rn(y);
  }
}

template <int kCols, int kAct>
__global__ void __launch_bounds__(kThreads, 1)
    glu_gemm_kernel(const Params p, const __grid_constant__ CUtensorMap xmap,
                    const __grid_constant__ CUtensorMap w0map,
                    const __grid_constant__ CUtensorMap w1map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<kCols>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* const base = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
  __shared__ __align__(8) uint64_t full[L::kStages], empty[L::kStages];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid == 0) {
    for (int s = 0; s < L::kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumers / 32);  // one arrival a consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the barriers, initialized; the block's only barrier of all its threads

  if (warp >= kConsumers / 32) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (warp != kConsumers / 32 || lane != 0) return;
    // Producer: stage `it` (counted over the block's tiles) waits for the consumers to have
    // released its previous use, then takes x's and both weights' boxes of one k block.
    int it = 0;
    for (int t = blockIdx.x; t < p.tiles; t += gridDim.x) {
      const glu_schedule::Tile tile = glu_schedule::tile_at(t, p.m, p.f, kCols);
      for (int kb = 0; kb < p.k_blocks; ++kb, ++it) {
        const int s = it % L::kStages;
        if (it >= L::kStages) mbar_wait(&empty[s], ((it / L::kStages) - 1) & 1);
        unsigned char* const st = base + s * L::kStageBytes;
        mbar_expect_tx(&full[s], L::kStageBytes);  // (zero-filled elements count too)
        tma_load_2d(st, &xmap, &full[s], kb * kBK, tile.m0);
        tma_load_2d(st + L::kABytes, &w0map, &full[s], kb * kBK, tile.n0);
        tma_load_2d(st + L::kABytes + L::kWBytes, &w1map, &full[s], kb * kBK, tile.n0);
      }
    }
    return;
  }

  // Consumers: warpgroup wg owns rows 64 wg..+63 of each tile.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int wg = warp / 4, wq = warp % 4;
  const uint64_t a_desc = wgmma::desc_sw128(smem_u32(base) + wg * 64 * 128, 16, 1024);
  const uint64_t b_desc = wgmma::desc_sw128(smem_u32(base) + L::kABytes, 16, 1024);
  float acc[L::kN / 2];
  int it = 0;
  for (int t = blockIdx.x; t < p.tiles; t += gridDim.x) {
    const glu_schedule::Tile tile = glu_schedule::tile_at(t, p.m, p.f, kCols);
#pragma unroll
    for (int i = 0; i < L::kN / 2; ++i) acc[i] = 0.0f;
    // One k block's products in flight behind the next's: a stage goes back to the producer once
    // the products that read it are done (wait<1> after the next block's are issued).
    for (int kb = 0; kb < p.k_blocks; ++kb, ++it) {
      const int s = it % L::kStages;
      mbar_wait(&full[s], (it / L::kStages) & 1);
      const uint32_t so = static_cast<uint32_t>(s * L::kStageBytes);
      fence_accumulators(acc);
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)  // 16 k a step: 32 bytes along the swizzled rows
        sgemm::Wgmma<L::kN>::run(acc, wgmma::desc_add(a_desc, so + kk * 32),
                                 wgmma::desc_add(b_desc, so + kk * 32));
      wgmma::commit();
      wgmma::wait<1>();
      fence_accumulators(acc);
      if (kb > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % L::kStages]);
    }
    wgmma::wait<0>();
    fence_accumulators(acc);
    if (p.k_blocks > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % L::kStages]);

    // wgmma's accumulator layout: 8 columns a group j, acc[4j..4j+1] in row (lane / 4), acc[4j +
    // 2..4j + 3] 8 rows below, at columns 8j + 2 (lane % 4) and the next; w1's columns are the
    // groups kCols / 8 further on.
    const int row0 = tile.m0 + wg * 64 + wq * 16 + lane / 4;
    const int col0 = tile.n0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int a = 4 * j + 2 * h, b = a + kCols / 2;
        const int row = row0 + 8 * h;
        if (row < p.m)
          store(p, row, col0 + 8 * j, glu<kAct>(acc[a], acc[b]), glu<kAct>(acc[a + 1], acc[b + 1]));
      }
    }
  }
#else
  __trap();
#endif
}

template <int kCols, int kAct>
void launch(const Params& p, const CUtensorMap& xmap, const CUtensorMap& w0map,
            const CUtensorMap& w1map, int grid, cudaStream_t stream) {
  constexpr auto kernel = glu_gemm_kernel<kCols, kAct>;
  constexpr int kSmem = Layout<kCols>::kSmem;
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) ==
           cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("glu_gemm: cannot raise the kernel's shared memory");
  kernel<<<static_cast<unsigned>(grid), kThreads, kSmem, stream>>>(p, xmap, w0map, w1map);
}

}  // namespace glu_gemm

const char* glu_gemm_unsupported(const GluGemmArgs& a, int cc_major, int cc_minor) {
  if (cc_major != 9 || cc_minor != 0) return "wgmma needs compute capability 9.0 (sm_90a)";
  if (!encode_tiled_fn()) return "the driver has no cuTensorMapEncodeTiled";
  if (a.act != kGluGemmSilu && a.act != kGluGemmGelu) return "an unknown activation";
  if (!a.out_bf16 && !a.out_f32) return "no output";
  if (a.m < 1 || a.k < 1 || a.f < 1) return "an empty product";
  // int tile coordinates and element offsets within the TMA's 32-bit dimensions.
  if (a.m > INT_MAX / 2 || a.f > INT_MAX / 2 || a.k > INT_MAX / 2) return "a dimension too large";
  if (a.k % 8 != 0 || a.ldx % 8 != 0 || a.ldx < a.k)
    return "k and x's row stride must be multiples of 8 (TMA's 16-byte strides)";
  if (!aligned16(a.x) || !aligned16(a.w0) || !aligned16(a.w1))
    return "x and the weights must be 16-byte aligned";
  if ((a.out_f32 && reinterpret_cast<uintptr_t>(a.out_f32) % 8 != 0) ||
      (a.out_bf16 && reinterpret_cast<uintptr_t>(a.out_bf16) % 4 != 0))
    return "a misaligned output";
  return nullptr;
}

void launch_glu_gemm(const void* args, cudaStream_t stream) {
  GluGemmArgs a;
  std::memcpy(static_cast<void*>(&a), args, sizeof a);
  const int cols = glu_schedule::tile_cols_for(a.m, a.f, a.sm_count, a.tile_cols);
  CUtensorMap xmap, w0map, w1map;
  const CUtensorMapDataType bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  if (!encode_2d_map(&xmap, bf16, a.x, a.m, a.k, a.ldx, glu_gemm::kBK, glu_gemm::kRows) ||
      !encode_2d_map(&w0map, bf16, a.w0, a.f, a.k, a.k, glu_gemm::kBK, cols) ||
      !encode_2d_map(&w1map, bf16, a.w1, a.f, a.k, a.k, glu_gemm::kBK, cols))
    throw std::runtime_error("glu_gemm: the driver refused a tensor map (m " + std::to_string(a.m) +
                             ", k " + std::to_string(a.k) + ", f " + std::to_string(a.f) + ")");
  glu_gemm::Params p{};
  p.out_bf16 = static_cast<__nv_bfloat16*>(a.out_bf16);
  p.out_f32 = a.out_f32;
  p.m = static_cast<int>(a.m);
  p.f = static_cast<int>(a.f);
  p.k_blocks = static_cast<int>((a.k + glu_gemm::kBK - 1) / glu_gemm::kBK);
  p.tiles = glu_schedule::row_tiles(a.m) * glu_schedule::col_tiles(a.f, cols);
  p.pairs = a.f % 2 == 0 ? 1 : 0;
  const int grid = static_cast<int>(std::min<int64_t>(p.tiles, std::max<int64_t>(1, a.sm_count)));
  using glu_gemm::launch;
  const bool gelu = a.act == kGluGemmGelu;
  if (cols == 128)
    return gelu ? launch<128, kGluGemmGelu>(p, xmap, w0map, w1map, grid, stream)
                : launch<128, kGluGemmSilu>(p, xmap, w0map, w1map, grid, stream);
  gelu ? launch<64, kGluGemmGelu>(p, xmap, w0map, w1map, grid, stream)
       : launch<64, kGluGemmSilu>(p, xmap, w0map, w1map, grid, stream);
}

}  // namespace infera::cuda
