// Matmul with Q8_0 / Q4_0 weights (ggml block layouts; the decision runtime's group-64 weights are
// written in them, one scale shared by a group's two blocks), out[n, m] = x[n, k] . w[m, k]^T.
// The weights are dequantized inside the kernel, a 64 x 64 tile at a time into shared memory as
// bf16 (never a full-precision copy in device memory); activations are rounded to bf16 the same
// way; bf16 tensor-core products (WMMA 16x16x16) accumulate in f32. Any n: one kernel serves a
// single row as well as a prefill batch.
#include <mma.h>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

constexpr int kTileRows = 64;  // rows of x (and of out) per block
constexpr int kTileCols = 64;  // weight rows (columns of out) per block
constexpr int kTileK = 64;     // two quant blocks of 32 per weight row per step
constexpr int kPad = 8;        // bf16 elements of padding per shared row (bank spread)
constexpr int kThreads = 128;  // 4 warps, each a 32 x 32 piece of the 64 x 64 output tile

__device__ __forceinline__ float half_bits_to_f32(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

// Dequantizes block `blk` of a weight row (32 values) into dst (bf16), Q8_0: d * q; Q4_0:
// d * (q - 8) with byte j holding element j (low nibble) and j + 16 (high nibble).
template <int kType>
__device__ __forceinline__ void dequant_block(const uint8_t* row, int64_t blk, __nv_bfloat16* dst) {
  if (kType == 0) {
    const uint8_t* b = row + blk * 34;
    const float d = half_bits_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
#pragma unroll
    for (int i = 0; i < 32; ++i)
      dst[i] = __float2bfloat16(d * static_cast<float>(static_cast<int8_t>(b[2 + i])));
  } else {
    const uint8_t* b = row + blk * 18;
    const float d = half_bits_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int q = b[2 + i];
      dst[i] = __float2bfloat16(d * static_cast<float>((q & 0x0F) - 8));
      dst[i + 16] = __float2bfloat16(d * static_cast<float>((q >> 4) - 8));
    }
  }
}

template <int kType>
__global__ void __launch_bounds__(kThreads)
    quant_matmul_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                        float* __restrict__ out, int64_t n, int64_t k, int64_t m) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 xs[kTileRows][kTileK + kPad];
  __shared__ __align__(32) __nv_bfloat16 ws[kTileCols][kTileK + kPad];
  __shared__ __align__(32) float cs[kTileRows][kTileCols + 4];
  const int64_t row_base = static_cast<int64_t>(blockIdx.y) * kTileRows;
  const int64_t col_base = static_cast<int64_t>(blockIdx.x) * kTileCols;
  const int tid = threadIdx.x, warp = tid / 32;
  const int wr = (warp / 2) * 32, wc = (warp % 2) * 32;  // the warp's piece of the tile
  const int64_t blocks = k / 32;
  const int64_t row_bytes = blocks * (kType == 0 ? 34 : 18);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    // x tile: 64 x 64 f32 -> bf16, zero past n and k.
#pragma unroll 4
    for (int i = tid; i < kTileRows * kTileK; i += kThreads) {
      const int r = i / kTileK, c = i % kTileK;
      const int64_t gr = row_base + r, gc = k0 + c;
      xs[r][c] = __float2bfloat16(gr < n && gc < k ? x[gr * k + gc] : 0.0f);
    }
    // Weight tile: each thread one quant block (weight row tid / 2, half tid % 2 of the step).
    {
      const int r = tid / 2, h = tid % 2;
      const int64_t gr = col_base + r, blk = k0 / 32 + h;
      __nv_bfloat16* dst = &ws[r][h * 32];
      if (gr < m && blk < blocks) {
        dequant_block<kType>(w + gr * row_bytes, blk, dst);
      } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) dst[i] = __float2bfloat16(0.0f);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        wmma::load_matrix_sync(a[i], &xs[wr + 16 * i][kk], kTileK + kPad);
        // ws is [col][k] row-major, i.e. the K x N operand in column-major order.
        wmma::load_matrix_sync(b[i], &ws[wc + 16 * i][kk], kTileK + kPad);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();  // the tiles are rewritten next step
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&cs[wr + 16 * i][wc + 16 * j], acc[i][j], kTileCols + 4,
                              wmma::mem_row_major);
  __syncthreads();
  for (int i = tid; i < kTileRows * kTileCols; i += kThreads) {
    const int r = i / kTileCols, c = i % kTileCols;
    const int64_t gr = row_base + r, gc = col_base + c;
    if (gr < n && gc < m) out[gr * m + gc] = cs[r][c];
  }
}

}  // namespace

void launch_quant_matmul(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const QuantMatmulArgs*>(p);
  const dim3 grid(blocks_for(a.m, kTileCols), blocks_for(a.n, kTileRows));
  const auto* w = static_cast<const uint8_t*>(a.w);
  if (a.q4)
    quant_matmul_kernel<1><<<grid, kThreads, 0, s>>>(a.x, w, a.out, a.n, a.k, a.m);
  else
    quant_matmul_kernel<0><<<grid, kThreads, 0, s>>>(a.x, w, a.out, a.n, a.k, a.m);
}

}  // namespace infera::cuda
