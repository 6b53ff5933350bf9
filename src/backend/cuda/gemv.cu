// Small-batch matmul (decode): out[n, m] = x[n, k] . w[m, k]^T for n <= kGemvMaxRows.
// Each warp owns R weight rows and streams them once, 16 bytes per lane per load, against all n
// rows of x (read through L1, they are small), accumulating in f32. One pass over the weights is
// the whole cost, so this runs at close to memory bandwidth when the grid fills the GPU.
#include <algorithm>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// k % kVec16<W> == 0 and 16-byte aligned rows: 16-byte loads.
template <typename W, int N, int R>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_vec_kernel(const float* __restrict__ x, const W* __restrict__ w, float* __restrict__ out,
                    int64_t k, int64_t m) {
  constexpr int V = kVec16<W>;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row0 = warp * R;
  if (row0 >= m) return;
  float acc[R][N];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < N; ++n) acc[r][n] = 0.0f;
  // kUnroll 16-byte weight loads per row in flight before any is used (k = 1024 in bf16 is one
  // round): a warp alone on a row is otherwise latency-bound.
  constexpr int kUnroll = 4;
  for (int64_t base0 = static_cast<int64_t>(lane) * V; base0 < k; base0 += 32 * V * kUnroll) {
    uint4 wu[R][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t base = base0 + static_cast<int64_t>(u) * 32 * V;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wu[r][u] = (base < k && row0 + r < m)
                       ? __ldg(reinterpret_cast<const uint4*>(w + (row0 + r) * k + base))
                       : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t base = base0 + static_cast<int64_t>(u) * 32 * V;
      if (base >= k) break;
      float wv[R][V];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack16(wu[r][u], wv[r], W{});
#pragma unroll
      for (int n = 0; n < N; ++n) {
        float xv[V];
#pragma unroll
        for (int q = 0; q < V / 4; ++q) {
          const float4 f = __ldg(reinterpret_cast<const float4*>(x + n * k + base) + q);
          xv[4 * q] = f.x;
          xv[4 * q + 1] = f.y;
          xv[4 * q + 2] = f.z;
          xv[4 * q + 3] = f.w;
        }
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[r][n] = fmaf(wv[r][e], xv[e], acc[r][n]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const float v = warp_sum(acc[r][n]);
      if (lane == 0 && row0 + r < m) out[n * m + row0 + r] = v;
    }
}

// Any k and alignment: one element per lane per step.
template <typename W, int N>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_scalar_kernel(const float* __restrict__ x, const W* __restrict__ w,
                       float* __restrict__ out, int64_t k, int64_t m) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= m) return;
  float acc[N];
#pragma unroll
  for (int n = 0; n < N; ++n) acc[n] = 0.0f;
  for (int64_t i = lane; i < k; i += 32) {
    const float wi = to_f32(w[row * k + i]);
#pragma unroll
    for (int n = 0; n < N; ++n) acc[n] = fmaf(wi, x[n * k + i], acc[n]);
  }
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const float v = warp_sum(acc[n]);
    if (lane == 0) out[n * m + row] = v;
  }
}

template <typename W, int N>
void gemv_for(const MatmulArgs& a, cudaStream_t s) {
  const auto* w = static_cast<const W*>(a.w);
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(w)) % 16) == 0 &&
      a.k % kVec16<W> == 0;
  if (aligned) {
    // Two weight rows per warp once x has several rows, so each x load serves two weight loads.
    constexpr int R = N <= 2 ? 1 : 2;
    const int64_t warps = (a.m + R - 1) / R;
    gemv_vec_kernel<W, N, R>
        <<<blocks_for(warps, kWarpsPerBlock), kWarpsPerBlock * 32, 0, s>>>(a.x, w, a.out, a.k, a.m);
  } else {
    gemv_scalar_kernel<W, N>
        <<<blocks_for(a.m, kWarpsPerBlock), kWarpsPerBlock * 32, 0, s>>>(a.x, w, a.out, a.k, a.m);
  }
}

template <typename W>
void gemv_typed(const MatmulArgs& a, cudaStream_t s) {
  switch (a.n) {
    case 1:
      return gemv_for<W, 1>(a, s);
    case 2:
      return gemv_for<W, 2>(a, s);
    case 3:
      return gemv_for<W, 3>(a, s);
    case 4:
      return gemv_for<W, 4>(a, s);
    case 5:
      return gemv_for<W, 5>(a, s);
    case 6:
      return gemv_for<W, 6>(a, s);
    case 7:
      return gemv_for<W, 7>(a, s);
    default:
      return gemv_for<W, 8>(a, s);
  }
}

}  // namespace

void launch_gemv(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const MatmulArgs*>(p);
  switch (a.weight_type) {
    case ElemType::F32:
      return gemv_typed<float>(a, s);
    case ElemType::F16:
      return gemv_typed<__half>(a, s);
    case ElemType::BF16:
      return gemv_typed<__nv_bfloat16>(a, s);
  }
}

}  // namespace infera::cuda
