// The TMA GEMMs' kernel (sm_90a): out tiles of x [m, k] . W^T through tensor-core products whose
// epilogue is the point, shared by glu_gemm.cu (the gated unit over two weights' products) and
// qkv_gemm.cu (qk-norm, RoPE and the cache writes over a q/k/v head's products).
//
// The structure is the TMA attention's (attention_tma_wgmma.cu), on a GEMM:
//   - a persistent grid, a block an SM, walks 128-row x tile-column output tiles in bands
//     (tma_gemm_schedule.h);
//   - one producer thread copies each 64-wide k block of the tile's x rows and of its weight rows
//     with TMA (128-byte swizzle) into a ring of stages guarded by mbarriers, running ahead into
//     the next tile while the consumers finish this one; a stage's weight rows are kSegments boxes
//     of kN / kSegments rows, box s from tensor map s (the GLU: w0's tile rows, then w1's);
//   - two consumer warpgroups own 64 rows each: one wgmma of N = kN a 16-wide k step, both
//     operands K-major in shared memory (the Hugging Face [out, in] layout), the f32 accumulators
//     in registers, handed to the epilogue when the tile's k loop is done;
//   - or, kPingPong (kN <= 128: twice the accumulators), each consumer warpgroup takes every
//     other tile of the block whole (two m64 products a k step) and they take turns at their k
//     loops, so that one's epilogue runs while the other's products keep the tensor cores busy
//     (CUTLASS's ping-pong schedule; the epilogue is otherwise not under any products).
// Zero fill of the TMA boxes covers m, the weight rows and k past the tiles.
//
// An epilogue Epi is a type with
//   static constexpr int kN, kSegments;  // a stage's weight rows, in that many boxes
//   __device__ void operator()(const gemm_schedule::Tile& tile, const float (&acc)[Epi::kN / 2],
//                              int row0, int lane) const;
// called by every consumer thread once its tile's products are done (with kPingPong, twice: the
// tile's upper and lower 64 rows): acc holds wgmma's accumulator layout, 8 columns a group j,
// acc[4j..4j+1] in row `row0` (the tile's m0 + 64 (wg or half) + 16 (warp % 4) + lane / 4),
// acc[4j + 2..4j + 3] in row0 + 8, at columns 8j + 2 (lane % 4) and the next. Every thread of a
// warp calls it (it may shuffle), rows past m included.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/stream_gemm_wgmma.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/tma_gemm_schedule.h"
#include "backend/cuda/wgmma.cuh"

namespace infera::cuda::tma_gemm {

constexpr int kBK = 64;  // k a stage: 64 bf16 = 128 bytes, one swizzled row
constexpr int kRows = gemm_schedule::kTileRows;
constexpr int kConsumers = 256;             // warpgroups 0 and 1
constexpr int kThreads = kConsumers + 128;  // warpgroup 2: the producer's (one thread works)
// As the TMA attention's: the producer gives its registers to the consumers (kN / 2 accumulators
// a thread), and the sum stays within the block's allocation at launch (168 x 384 at one block an
// SM), or setmaxnreg.inc would wait forever.
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
static_assert(kProducerRegs * (kThreads - kConsumers) + kConsumerRegs * kConsumers <=
                  65536 / kThreads / 8 * 8 * kThreads,
              "setmaxnreg would wait for more registers than the block holds");
constexpr int kRingBytes = 192 * 1024;  // of an SM's 227 KB

template <int kN, int kSegments>
struct Layout {
  static constexpr int kABytes = kRows * kBK * 2;                 // x: 128 rows
  static constexpr int kSegmentBytes = kN / kSegments * kBK * 2;  // one box of weight rows
  static constexpr int kStageBytes = kABytes + kN * kBK * 2;      // multiples of the 1024-byte atom
  static constexpr int kStages = kRingBytes / kStageBytes;        // 4 at kN 256, 6 at 128
  static constexpr int kSmem = kStages * kStageBytes + 1024;      // + alignment slack
  static_assert(kSegmentBytes % 1024 == 0, "a box must start at a swizzle atom");
};

// The output's tile grid: [m, n] in tiles of kRows x cols; k_blocks of kBK along k.
struct Tiling {
  int m, n, cols, k_blocks, tiles;
};
// (Host side; the callers' checks keep m, n and k within int.)
inline Tiling tiling(int64_t m, int64_t n, int cols, int64_t k) {
  return {static_cast<int>(m), static_cast<int>(n), cols, static_cast<int>((k + kBK - 1) / kBK),
          gemm_schedule::row_tiles(m) * gemm_schedule::col_tiles(n, cols)};
}
// The persistent grid: a block an SM, or fewer where there are fewer tiles.
inline int grid_for(const Tiling& tg, int64_t sms) {
  return static_cast<int>(std::min<int64_t>(tg.tiles, std::max<int64_t>(1, sms)));
}

// Why the kernel cannot take x [m, k] (row stride ldx) against weights [n, k] (w0, and w1 where
// set), or nullptr: it wants a compute capability 9.0 device with the driver's tensor-map encoder,
// int-sized non-empty dimensions (tile coordinates and offsets within TMA's 32-bit ones), k and
// ldx multiples of 8 (TMA's 16-byte strides) and 16-byte aligned operands.
inline const char* operands_unsupported(int cc_major, int cc_minor, int64_t m, int64_t k, int64_t n,
                                        int64_t ldx, const void* x, const void* w0,
                                        const void* w1) {
  if (cc_major != 9 || cc_minor != 0) return "wgmma needs compute capability 9.0 (sm_90a)";
  if (!encode_tiled_fn()) return "the driver has no cuTensorMapEncodeTiled";
  if (m < 1 || k < 1 || n < 1) return "an empty product";
  if (m > INT_MAX / 2 || n > INT_MAX / 2 || k > INT_MAX / 2) return "a dimension too large";
  if (k % 8 != 0 || ldx % 8 != 0 || ldx < k)
    return "k and x's row stride must be multiples of 8 (TMA's 16-byte strides)";
  const auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (misaligned(x) || misaligned(w0) || (w1 && misaligned(w1)))
    return "x and the weights must be 16-byte aligned";
  return nullptr;
}

// The tensor maps of the operands, bf16 with the 128-byte swizzle: x [m, k] (row stride ldx) in
// boxes of kRows rows, a weight [rows, k] in boxes of box_rows; both kBK wide. Throw, naming the
// kernel and the shape, where the driver refuses one.
inline CUtensorMap x_map(const char* kernel, const void* x, int64_t m, int64_t k, int64_t ldx) {
  CUtensorMap map;
  if (!encode_2d_map(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, m, k, ldx, kBK, kRows))
    throw std::runtime_error(std::string(kernel) + ": the driver refused x's tensor map (" +
                             std::to_string(m) + " x " + std::to_string(k) + ")");
  return map;
}
inline CUtensorMap w_map(const char* kernel, const void* w, int64_t rows, int64_t k, int box_rows) {
  CUtensorMap map;
  if (!encode_2d_map(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, w, rows, k, k, kBK, box_rows))
    throw std::runtime_error(std::string(kernel) + ": the driver refused a weight's tensor map (" +
                             std::to_string(rows) + " x " + std::to_string(k) + ")");
  return map;
}

template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <class Epi, bool kPingPong>
__global__ void __launch_bounds__(kThreads, 1)
    tma_gemm_kernel(const Epi epi, const Tiling tg, const __grid_constant__ CUtensorMap xmap,
                    const __grid_constant__ CUtensorMap w0map,
                    const __grid_constant__ CUtensorMap w1map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<Epi::kN, Epi::kSegments>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* const base = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
  __shared__ __align__(8) uint64_t full[L::kStages], empty[L::kStages];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid == 0) {
    for (int s = 0; s < L::kStages; ++s) {
      mbar_init(&full[s], 1);
      // One arrival a consumer warp that reads the stage: both warpgroups' or, ping-pong, one's.
      mbar_init(&empty[s], kPingPong ? 4 : kConsumers / 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the barriers, initialized; the block's only barrier of all its threads

  if (warp >= kConsumers / 32) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (warp != kConsumers / 32 || lane != 0) return;
    // Producer: stage `it` (counted over the block's tiles) waits for the consumers to have
    // released its previous use, then takes x's box and the weight boxes of one k block.
    int it = 0;
    for (int t = blockIdx.x; t < tg.tiles; t += gridDim.x) {
      const gemm_schedule::Tile tile = gemm_schedule::tile_at(t, tg.m, tg.n, tg.cols);
      for (int kb = 0; kb < tg.k_blocks; ++kb, ++it) {
        const int s = it % L::kStages;
        if (it >= L::kStages) mbar_wait(&empty[s], ((it / L::kStages) - 1) & 1);
        unsigned char* const st = base + s * L::kStageBytes;
        mbar_expect_tx(&full[s], L::kStageBytes);  // (zero-filled elements count too)
        tma_load_2d(st, &xmap, &full[s], kb * kBK, tile.m0);
#pragma unroll
        for (int seg = 0; seg < Epi::kSegments; ++seg)
          tma_load_2d(st + L::kABytes + seg * L::kSegmentBytes, seg == 0 ? &w0map : &w1map,
                      &full[s], kb * kBK, tile.n0);
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int wg = warp / 4, wq = warp % 4;
  const uint32_t a_addr = smem_u32(base);
  const uint64_t b_desc = wgmma::desc_sw128(a_addr + L::kABytes, 16, 1024);
  if constexpr (!kPingPong) {
    // Consumers: warpgroup wg owns rows 64 wg..+63 of each tile.
    const uint64_t a_desc = wgmma::desc_sw128(a_addr + wg * 64 * 128, 16, 1024);
    float acc[Epi::kN / 2];
    int it = 0;
    for (int t = blockIdx.x; t < tg.tiles; t += gridDim.x) {
      const gemm_schedule::Tile tile = gemm_schedule::tile_at(t, tg.m, tg.n, tg.cols);
#pragma unroll
      for (int i = 0; i < Epi::kN / 2; ++i) acc[i] = 0.0f;
      // One k block's products in flight behind the next's: a stage goes back to the producer
      // once the products that read it are done (wait<1> after the next block's are issued).
      for (int kb = 0; kb < tg.k_blocks; ++kb, ++it) {
        const int s = it % L::kStages;
        mbar_wait(&full[s], (it / L::kStages) & 1);
        const uint32_t so = static_cast<uint32_t>(s * L::kStageBytes);
        fence_accumulators(acc);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)  // 16 k a step: 32 bytes along the swizzled rows
          sgemm::Wgmma<Epi::kN>::run(acc, wgmma::desc_add(a_desc, so + kk * 32),
                                     wgmma::desc_add(b_desc, so + kk * 32));
        wgmma::commit();
        wgmma::wait<1>();
        fence_accumulators(acc);
        if (kb > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % L::kStages]);
      }
      wgmma::wait<0>();
      fence_accumulators(acc);
      if (tg.k_blocks > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % L::kStages]);
      epi(tile, acc, tile.m0 + wg * 64 + wq * 16 + lane / 4, lane);
    }
  } else {
    static_assert(Epi::kN <= 128, "ping-pong holds two m64 accumulators of kN / 2 a thread");
    // Warpgroup wg takes the block's tiles of ordinal i = wg, wg + 2, ... whole. The producer
    // fills the ring tile after tile, ordinal i's k blocks as stages i k_blocks.. A warpgroup
    // waits for its turn (named barrier 2 + wg) before its k loop: until the other has waited for
    // all of ordinal i - 1's stages. That is what keeps each stage's phase wait at most one phase
    // ahead of the barrier (a parity wait two phases ahead would pass on an old phase), and it
    // orders the products: one warpgroup's k loop, then the other's while the first one's
    // epilogue runs. The turn passes (bar.arrive) only where an ordinal i + 1 exists, so every
    // arrival has its wait.
    const int ntiles = (tg.tiles - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) /
                       static_cast<int>(gridDim.x);
    const uint64_t a_lo = wgmma::desc_sw128(a_addr, 16, 1024);
    const uint64_t a_hi = wgmma::desc_sw128(a_addr + 64 * 128, 16, 1024);
    float acc0[Epi::kN / 2], acc1[Epi::kN / 2];
    for (int i = wg; i < ntiles; i += 2) {
      const int t = static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x);
      const gemm_schedule::Tile tile = gemm_schedule::tile_at(t, tg.m, tg.n, tg.cols);
#pragma unroll
      for (int j = 0; j < Epi::kN / 2; ++j) acc0[j] = acc1[j] = 0.0f;
      if (i > 0) asm volatile("bar.sync %0, %1;\n" ::"r"(2 + wg), "n"(kConsumers) : "memory");
      int it = i * tg.k_blocks;
      for (int kb = 0; kb < tg.k_blocks; ++kb, ++it) {
        const int s = it % L::kStages;
        mbar_wait(&full[s], (it / L::kStages) & 1);
        const uint32_t so = static_cast<uint32_t>(s * L::kStageBytes);
        fence_accumulators(acc0);
        fence_accumulators(acc1);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          const uint64_t b = wgmma::desc_add(b_desc, so + kk * 32);
          sgemm::Wgmma<Epi::kN>::run(acc0, wgmma::desc_add(a_lo, so + kk * 32), b);
          sgemm::Wgmma<Epi::kN>::run(acc1, wgmma::desc_add(a_hi, so + kk * 32), b);
        }
        wgmma::commit();
        wgmma::wait<1>();
        fence_accumulators(acc0);
        fence_accumulators(acc1);
        if (kb > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % L::kStages]);
      }
      // Every stage of ordinal i waited for: the other warpgroup's turn (ordinal i + 1).
      if (i + 1 < ntiles)
        asm volatile("bar.arrive %0, %1;\n" ::"r"(3 - wg), "n"(kConsumers) : "memory");
      wgmma::wait<0>();
      fence_accumulators(acc0);
      fence_accumulators(acc1);
      if (tg.k_blocks > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % L::kStages]);
      epi(tile, acc0, tile.m0 + wq * 16 + lane / 4, lane);
      epi(tile, acc1, tile.m0 + 64 + wq * 16 + lane / 4, lane);
    }
  }
#else
  __trap();
#endif
}

// One launch: grid blocks (at most one an SM) over tg's tiles.
template <class Epi, bool kPingPong = false>
void launch(const Epi& epi, const Tiling& tg, const CUtensorMap& xmap, const CUtensorMap& w0map,
            const CUtensorMap& w1map, int grid, cudaStream_t stream) {
  constexpr auto kernel = tma_gemm_kernel<Epi, kPingPong>;
  constexpr int kSmem = Layout<Epi::kN, Epi::kSegments>::kSmem;
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) ==
           cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("tma_gemm: cannot raise the kernel's shared memory");
  kernel<<<static_cast<unsigned>(grid), kThreads, kSmem, stream>>>(epi, tg, xmap, w0map, w1map);
}

}  // namespace infera::cuda::tma_gemm
