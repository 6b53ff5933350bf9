// Small-batch matmul (decode): out[n, m] = x[n, k] . w[m, k]^T for n <= kGemvMaxRows, also for
// several weights sharing x in one launch (q/k/v) and gate/up with SwiGLU in the epilogue.
// Each warp owns R weight rows and streams them once, 16 bytes per lane per load, against all n
// rows of x (read through L1, they are small), accumulating in f32. One pass over the weights is
// the whole cost, so this runs at close to memory bandwidth when the grid fills the GPU.
#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <unordered_set>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// Element i (< kGemvMaxSegments) of a parameter array, by selects: indexing a kernel
// parameter's array with a run-time index copies the whole struct to local memory.
template <typename T>
__device__ __forceinline__ T pick(const T (&v)[kGemvMaxSegments], int i) {
  static_assert(kGemvMaxSegments == 3);
  return i == 0 ? v[0] : i == 1 ? v[1] : v[2];
}

// The weight rows one warp owns: segment seg of the GemvArgs (several weights sharing x, as the
// q/k/v projections), rows [row0, row0 + R) of it.
struct WarpRows {
  int seg;
  int64_t row0;
};
__device__ __forceinline__ WarpRows warp_rows(const GemvArgs& a, int64_t warp, int R,
                                              int segments) {
  const int64_t w0 = (a.m[0] + R - 1) / R, w1 = (a.m[1] + R - 1) / R;
  if (segments == 1 || warp < w0) return {0, warp * R};
  if (segments == 2 || warp < w0 + w1) return {1, (warp - w0) * R};
  return {2, (warp - w0 - w1) * R};
}

// GemvArgs' fusions as the kernel's F bits (gemv_fusion_applies).
constexpr int kFuseNorm = 1, kFuseResidual = 2;

// 1 / sqrt(mean(x^2) + eps) over x [k] (k % 8 == 0, k <= 4096) in the summation order of the
// one-block norm kernels at one float4 per thread (rmsnorm_rows_kernel, add_rmsnorm_rows_kernel
// with K = 1): thread t of ceil(k / 128) warps squares float4 t, each warp sums by xor butterfly
// (offsets 16 .. 1), warp 0 sums the warps' partials the same way. One warp reproduces that here
// alone: in round r (256 floats) lane l holds float4s 2l and 2l + 1, which are virtual lanes
// 2 (l % 16) + j of virtual warp 2r + l / 16, so the virtual offsets 16, 8, 4, 2 are lane offsets
// 8, 4, 2, 1 and offset 1 is the pair's own sum. Same bits as those kernels' norm.
__device__ __forceinline__ float norm_scale(const float* __restrict__ x, int64_t k, int lane,
                                            float eps) {
  float t = 0.0f;
  const int rounds = static_cast<int>((k + 255) / 256);
  // Four rounds' loads in flight at once (a round at a time would wait for L2 each time).
  for (int r0 = 0; r0 < rounds; r0 += 4) {
    float4 v[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t base = static_cast<int64_t>(lane) * 8 + static_cast<int64_t>(r0 + i) * 256;
#pragma unroll
      for (int j = 0; j < 2; ++j)
        v[i][j] = base < k ? __ldg(reinterpret_cast<const float4*>(x + base) + j)
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float s[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float4 c = v[i][j];
        s[j] = 0.0f;
        s[j] += c.x * c.x + c.y * c.y + c.z * c.z + c.w * c.w;  // as the norm kernels' ss
      }
#pragma unroll
      for (int off = 8; off > 0; off >>= 1)
#pragma unroll
        for (int j = 0; j < 2; ++j) s[j] += __shfl_xor_sync(0xffffffffu, s[j], off);
      const float part = __shfl_sync(0xffffffffu, s[0] + s[1], (lane & 1) * 16);
      if (lane >> 1 == r0 + i) t = part;  // lane i holds virtual warp i's partial, as part[i]
    }
  }
  t = warp_sum(t);
  return 1.0f / sqrtf(t / static_cast<float>(k) + eps);
}

// k % kVec16<W> == 0 and 16-byte aligned rows: 16-byte loads. G = 1: out[s] = x . w[s]^T for
// the warp's segment; G = 2 (SwiGLU): the warp reads the same R rows of w[0] (gate) and w[1]
// (up) and writes silu(gate) * up to out[0], so the MLP's first half is one pass and no
// intermediate [n, f] round trip. U: 16-byte weight loads per lane per row in flight at once;
// P (GemvArgs::tune has kTuneGemvPreload): the first round of U loads is issued before
// pdl_wait(), so the weights stream while the previous kernel finishes (they are constant
// during a step). F (kFuse* bits, one x row and bf16 only): kFuseNorm normalizes x first
// (GemvArgs::norm; its weights preloaded with the round), kFuseResidual adds to out.
template <typename W, int N, int R, int G, int U = 4, bool P = false, int F = 0>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_vec_kernel(const GemvArgs a) {
  constexpr int V = kVec16<W>;
  static_assert(F == 0 || (N == 1 && std::is_same_v<W, __nv_bfloat16>));
  if (a.tune & kTuneGemvEarlyTrigger) pdl_trigger();
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  // SwiGLU: one row space (gate and up rows pair up), the grid's spare warps find no row.
  const WarpRows wr = warp_rows(a, warp, R, G == 1 ? static_cast<int>(a.segments) : 1);
  const int64_t row0 = wr.row0, m = pick(a.m, wr.seg), k = a.k;
  if (row0 >= m) return;
  const float* __restrict__ x = a.x;
  const W* __restrict__ w[G];
#pragma unroll
  for (int g = 0; g < G; ++g) w[g] = static_cast<const W*>(G == 1 ? pick(a.w, wr.seg) : a.w[g]);
  uint4 wu[G][R][U];
  uint4 nu[(F & kFuseNorm) ? U : 1];  // the norm's weights (kFuseNorm), as the row's
  auto load_round = [&](int64_t base0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t base = base0 + static_cast<int64_t>(u) * 32 * V;
      if constexpr ((F & kFuseNorm) != 0)
        nu[u] = base < k ? __ldg(reinterpret_cast<const uint4*>(
                               static_cast<const __nv_bfloat16*>(a.norm) + base))
                         : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int r = 0; r < R; ++r)
          wu[g][r][u] = (base < k && row0 + r < m)
                            ? __ldg(reinterpret_cast<const uint4*>(w[g] + (row0 + r) * k + base))
                            : make_uint4(0, 0, 0, 0);
    }
  };
  const int64_t first = static_cast<int64_t>(lane) * V;
  if constexpr (P) load_round(first);
  // The weights are constant during a step: their first lines (past the preloaded round) head
  // for L2 before the wait for the kernel that writes x (PDL, see device_util.cuh), so the
  // stream starts during its tail.
  for (int64_t base = first + (P ? int64_t{32} * V * U : 0); base < k; base += 32 * V)
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (row0 + r < m) prefetch_l2(w[g] + (row0 + r) * k + base);
  pdl_wait();
  pdl_trigger();
  float inv = 1.0f;
  if constexpr ((F & kFuseNorm) != 0) inv = norm_scale(x, k, lane, static_cast<float>(a.eps));
  float acc[G][R][N];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < N; ++n) acc[g][r][n] = 0.0f;
  // U 16-byte weight loads per row in flight before any is used (k = 1024 in bf16 is one round
  // of 4): a warp alone on a row is otherwise latency-bound.
  for (int64_t base0 = first; base0 < k; base0 += 32 * V * U) {
    if (!P || base0 != first) load_round(base0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t base = base0 + static_cast<int64_t>(u) * 32 * V;
      if (base >= k) break;
      float wv[G][R][V];
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int r = 0; r < R; ++r) unpack16(wu[g][r][u], wv[g][r], W{});
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
        if constexpr ((F & kFuseNorm) != 0) {
          // As the norm kernels: w * (x * inv); the first warp also writes the normalized row.
          float nv[V];
          unpack16(nu[u], nv, W{});
#pragma unroll
          for (int e = 0; e < V; ++e) xv[e] = nv[e] * (xv[e] * inv);
          if (warp == 0 && a.norm_out)
#pragma unroll
            for (int q = 0; q < V / 4; ++q)
              reinterpret_cast<float4*>(a.norm_out + base)[q] =
                  make_float4(xv[4 * q], xv[4 * q + 1], xv[4 * q + 2], xv[4 * q + 3]);
        }
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int e = 0; e < V; ++e) acc[g][r][n] = fmaf(wv[g][r][e], xv[e], acc[g][r][n]);
      }
    }
  }
  float* out = G == 1 ? pick(a.out, wr.seg) : a.out[0];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < N; ++n) {
      float v = warp_sum(acc[0][r][n]);
      if constexpr (G == 2) {
        const float up = warp_sum(acc[G - 1][r][n]);
        v = v / (1.0f + expf(-v)) * up;  // as swiglu_kernel
      }
      if (lane == 0 && row0 + r < m) {
        float& o = out[n * m + row0 + r];
        o = (F & kFuseResidual) != 0 ? o + v : v;  // the residual add: as add(x, proj, x)
      }
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

// kTuneMaxSharedCarveout: the kernel's preferred carveout set to the most shared memory, once per
// kernel (a hint the driver follows where it can; failures leave the default).
void prefer_max_shared(const void* kernel) {
  static std::mutex mutex;
  static std::unordered_set<const void*> done;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert(kernel).second) return;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                           cudaSharedmemCarveoutMaxShared) != cudaSuccess)
    cudaGetLastError();
}

// Whether every weight of `a` and x allow 16-byte loads.
template <typename W>
bool vec_aligned(const GemvArgs& a) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(a.x);
  for (int64_t s = 0; s < a.segments; ++s) bits |= reinterpret_cast<uintptr_t>(a.w[s]);
  return bits % 16 == 0 && a.k % kVec16<W> == 0;
}

// The fused variants (gemv_fusion_applies holds): one x row, one weight row per warp.
template <int F, bool P>
void launch_fused(const GemvArgs& a, unsigned grid, cudaStream_t s) {
  using W = __nv_bfloat16;
  if (a.swiglu)
    return launch_pdl(gemv_vec_kernel<W, 1, 1, 2, 4, P, F>, grid, kWarpsPerBlock * 32, 0, s, a);
  if constexpr (P) {  // as the plain preload: the whole row up to k = 2048
    if (a.k > 4 * 32 * kVec16<W>)
      return launch_pdl(gemv_vec_kernel<W, 1, 1, 1, 8, P, F>, grid, kWarpsPerBlock * 32, 0, s, a);
  }
  launch_pdl(gemv_vec_kernel<W, 1, 1, 1, 4, P, F>, grid, kWarpsPerBlock * 32, 0, s, a);
}

template <int F>
void launch_fused(const GemvArgs& a, unsigned grid, cudaStream_t s) {
  if (a.tune & kTuneGemvPreload) return launch_fused<F, true>(a, grid, s);
  launch_fused<F, false>(a, grid, s);
}

template <typename W, int N>
void gemv_for(const GemvArgs& a, cudaStream_t s) {
  if (a.norm || a.residual) {
    if (!gemv_fusion_applies(a)) throw std::runtime_error("gemv: fusion outside its shapes");
    if constexpr (std::is_same_v<W, __nv_bfloat16> && N == 1) {
      int64_t warps = 0;
      for (int64_t g = 0; g < (a.swiglu ? 1 : a.segments); ++g) warps += a.m[g];
      const unsigned grid = blocks_for(warps, kWarpsPerBlock);
      if (a.norm) return launch_fused<kFuseNorm>(a, grid, s);
      return launch_fused<kFuseResidual>(a, grid, s);
    }
  }
  if (vec_aligned<W>(a)) {
    // Two weight rows per warp once x has several rows, so each x load serves two weight loads.
    constexpr int R = N <= 2 ? 1 : 2;
    int64_t warps = 0;
    for (int64_t g = 0; g < (a.swiglu ? 1 : a.segments); ++g) warps += (a.m[g] + R - 1) / R;
    const unsigned grid = blocks_for(warps, kWarpsPerBlock);
    // Preloading (bf16 weights, one or two x rows): the whole row in registers up to k = 2048
    // (8 loads per lane), 4 loads for SwiGLU's two rows at k <= 1024 (registers bound how many
    // blocks stay resident while they wait).
    if constexpr (std::is_same_v<W, __nv_bfloat16> && N <= 2) {
      if (a.tune & kTuneGemvPreload) {
        const bool short_row = a.k <= 4 * 32 * kVec16<W>;
        auto* kernel = a.swiglu    ? gemv_vec_kernel<W, N, R, 2, 4, true>
                       : short_row ? gemv_vec_kernel<W, N, R, 1, 4, true>
                                   : gemv_vec_kernel<W, N, R, 1, 8, true>;
        if (a.tune & kTuneMaxSharedCarveout)
          prefer_max_shared(reinterpret_cast<const void*>(kernel));
        launch_pdl(kernel, grid, kWarpsPerBlock * 32, 0, s, a);
        return;
      }
    }
    if (a.swiglu)
      launch_pdl(gemv_vec_kernel<W, N, R, 2>, grid, kWarpsPerBlock * 32, 0, s, a);
    else
      launch_pdl(gemv_vec_kernel<W, N, R, 1>, grid, kWarpsPerBlock * 32, 0, s, a);
    return;
  }
  // Unaligned: one plain launch per weight (then the SwiGLU pass).
  for (int64_t g = 0; g < a.segments; ++g) {
    const auto* w = static_cast<const W*>(a.w[g]);
    gemv_scalar_kernel<W, N><<<blocks_for(a.m[g], kWarpsPerBlock), kWarpsPerBlock * 32, 0, s>>>(
        a.x, w, a.out[g], a.k, a.m[g]);
  }
  if (a.swiglu) {
    BinaryArgs b{a.out[0], a.out[1], a.out[0], a.n * a.m[0]};
    launch_swiglu(&b, s);
  }
}

template <typename W>
void gemv_typed(const GemvArgs& a, cudaStream_t s) {
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

bool gemv_fusion_applies(const GemvArgs& a) {
  if (a.n != 1 || a.weight_type != ElemType::BF16 || !vec_aligned<__nv_bfloat16>(a)) return false;
  if (a.segments < 1 || a.segments > kGemvMaxSegments || (a.swiglu && a.segments != 2))
    return false;
  if (a.residual) return a.residual == 1 && !a.norm && !a.swiglu;
  return a.norm && a.k <= 4096 && aligned16(a.norm) && (!a.norm_out || aligned16(a.norm_out));
}

void launch_gemv_multi(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const GemvArgs*>(p);
  switch (a.weight_type) {
    case ElemType::F32:
      return gemv_typed<float>(a, s);
    case ElemType::F16:
      return gemv_typed<__half>(a, s);
    case ElemType::BF16:
      return gemv_typed<__nv_bfloat16>(a, s);
  }
}

void launch_gemv(const void* p, cudaStream_t s) {
  const auto& m = *static_cast<const MatmulArgs*>(p);
  GemvArgs a{};
  a.x = m.x;
  a.w[0] = m.w;
  a.out[0] = m.out;
  a.m[0] = m.m;
  a.segments = 1;
  a.weight_type = m.weight_type;
  a.n = m.n;
  a.k = m.k;
  a.tune = m.tune;
  launch_gemv_multi(&a, s);
}

}  // namespace infera::cuda
