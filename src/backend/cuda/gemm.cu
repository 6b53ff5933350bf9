// Tiled CUDA-core GEMM, out[n, m] = x[n, k] . w[m, k]^T, f32 activations and accumulation, weights
// of any float type widened on the fly. It serves f16 weights at any batch (converting activations
// to f16 for the tensor cores could overflow where bf16 would not) and the exact-f32 mode that the
// fixture parity tests use; bf16 and f32 weights at larger batches go to cuBLAS.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

constexpr int kTile = 64, kDepth = 16;

// 256 threads, each a 4 x 4 block of the 64 x 64 output tile.
template <typename W>
__global__ void __launch_bounds__(256)
    gemm_simt_kernel(const float* __restrict__ x, const W* __restrict__ w, float* __restrict__ out,
                     int64_t n, int64_t k, int64_t m) {
  __shared__ float xs[kDepth][kTile + 4];
  __shared__ float ws[kDepth][kTile + 4];
  const int64_t row_base = static_cast<int64_t>(blockIdx.y) * kTile;  // rows of x / out
  const int64_t col_base = static_cast<int64_t>(blockIdx.x) * kTile;  // rows of w / cols of out
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int idx = tid + i * 256, r = idx / kDepth, c = idx % kDepth;
      const int64_t kk = k0 + c;
      xs[c][r] = (row_base + r < n && kk < k) ? x[(row_base + r) * k + kk] : 0.0f;
      ws[c][r] = (col_base + r < m && kk < k) ? to_f32(w[(col_base + r) * k + kk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kDepth; ++c) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        av[i] = xs[c][ty * 4 + i];
        bv[i] = ws[c][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = row_base + ty * 4 + i;
    if (r >= n) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = col_base + tx * 4 + j;
      if (c < m) out[r * m + c] = acc[i][j];
    }
  }
}

}  // namespace

void launch_gemm_simt(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const MatmulArgs*>(p);
  const dim3 grid(blocks_for(a.m, kTile), blocks_for(a.n, kTile));
  switch (a.weight_type) {
    case ElemType::F32:
      gemm_simt_kernel<<<grid, 256, 0, s>>>(a.x, static_cast<const float*>(a.w), a.out, a.n, a.k,
                                            a.m);
      break;
    case ElemType::F16:
      gemm_simt_kernel<<<grid, 256, 0, s>>>(a.x, static_cast<const __half*>(a.w), a.out, a.n, a.k,
                                            a.m);
      break;
    case ElemType::BF16:
      gemm_simt_kernel<<<grid, 256, 0, s>>>(a.x, static_cast<const __nv_bfloat16*>(a.w), a.out, a.n,
                                            a.k, a.m);
      break;
  }
}

}  // namespace infera::cuda
