// Backend::residual_mlp for one decode row with bf16 weights as one kernel: residual add + norm,
// gate/up + SiLU, down projection + residual add, and the next layer's norm.
//
// Why one kernel: at batch 1 each GEMV of the chain is a single wave that ramps up and drains, and
// the HBM sits idle between them. Here every block asks for ALL of its weight bytes (its slice of
// gate, up and down: ~144 KB for Qwen3-0.6B) with three bulk copies (TMA, cp.async.bulk) into
// shared memory at its very start, before its PDL wait: weights do not depend on activations, so
// the whole block's ~19 MB stream while the kernel before it finishes, and the down projection's
// bytes are already in shared memory when the gate/up results are.
//
// Phases (grid of `blocks` co-resident blocks, one per SM):
//   A. each block: s = x + delta and xn = rmsnorm(s) * mlp_norm, recomputed redundantly (d is
//      small); its gate_rows outputs h[j] = silu(xn . Wg[j]) * (xn . Wu[j]) to global memory.
//   grid barrier (arrival counter; every block is resident: the grid is at most the co-resident
//      count, and the next kernel is triggered only after it).
//   B. each block: h into shared memory, its down_rows rows r: x[r] = s[r] + h . Wd[r].
//   tail: the last block to finish (done counter) computes xn = rmsnorm(x) * next_norm and
//      resets both counters to zero for the next launch (they live in zeroed scratch).
//
// Measured on the H200 (docs/notes/2026-12-01/issue-11-cudamk.md): ~16-19 us a launch, about the
// four kernels it replaces, and not faster end to end, so CudaOptions::residual_mlp is off. ncu:
// latency-bound on the dot products with 2 warps per scheduler, not on HBM (the weights half in
// L2 barely change it); cp.async instead of TMA changes nothing, 512 threads help (19.4 -> 17.1).
#include <algorithm>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/residual_mlp.h"

namespace infera::cuda {
namespace {

// Threads per block: 256 by default, 512 with ResidualMlpArgs::threads (more warps to hide the
// dot products' latency; the grid stays one block per SM).
constexpr int kMaxThreads = 512, kMaxWarps = kMaxThreads / 32;

template <typename W>
__global__ void __launch_bounds__(kMaxThreads)
    residual_mlp_kernel(float* x, const float* delta, const W* __restrict__ mlp_norm,
                        const __nv_bfloat16* __restrict__ w_gate,
                        const __nv_bfloat16* __restrict__ w_up,
                        const __nv_bfloat16* __restrict__ w_down, const W* __restrict__ next_norm,
                        float* xn, float* h, unsigned* sync, int64_t d, int64_t f,
                        int64_t gate_rows, int64_t down_rows, int64_t chunk, int64_t lsu,
                        float eps) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t bars[2];
  __shared__ float part[kMaxWarps];
  __shared__ int last;
  auto* sg = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* su = sg + gate_rows * d;
  __nv_bfloat16* sd = su + gate_rows * d;
  auto* ss = reinterpret_cast<float*>(sd + down_rows * f);  // x + delta, [d]
  float* sxn = ss + d;                                      // the MLP norm's output, [d]
  float* sh = sxn + d;                                      // h, [f]

  const int64_t j0 = blockIdx.x * gate_rows, r0 = blockIdx.x * down_rows;
  const int64_t jn = max(int64_t{0}, min(gate_rows, f - j0));
  const int64_t rn = max(int64_t{0}, min(down_rows, d - r0));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int nthreads = static_cast<int>(blockDim.x), nwarps = nthreads / 32;
  if (lsu) {
    // The LSU path (ResidualMlpArgs::lsu): every thread requests 16-byte pieces with cp.async,
    // gate and up as one group, down as the next, before the PDL wait.
    auto copy = [&](void* dst, const void* src, int64_t bytes) {
      for (int64_t i = threadIdx.x; i < bytes / 16; i += nthreads)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                         smem_u32(static_cast<unsigned char*>(dst) + 16 * i)),
                     "l"(static_cast<const unsigned char*>(src) + 16 * i)
                     : "memory");
    };
    copy(sg, w_gate + j0 * d, jn * d * 2);
    copy(su, w_up + j0 * d, jn * d * 2);
    asm volatile("cp.async.commit_group;" ::: "memory");
    copy(sd, w_down + r0 * f, rn * f * 2);
    asm volatile("cp.async.commit_group;" ::: "memory");
  } else if (warp == 0) {
    const auto gate_bytes = static_cast<uint32_t>(jn * d * 2);
    const auto down_bytes = static_cast<uint32_t>(rn * f * 2);
    if (lane == 0) {
      mbar_init(&bars[0], 1);
      mbar_init(&bars[1], 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      if (jn > 0) mbar_expect_tx(&bars[0], 2 * gate_bytes);
      if (rn > 0) mbar_expect_tx(&bars[1], down_bytes);
    }
    __syncwarp();
    // Constant weights: requested before the PDL wait (device_util.cuh's rule), in pieces of
    // `chunk` bytes spread over the warp's lanes (0: one copy per slice).
    auto issue = [&](void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint32_t first) {
      const uint32_t piece = chunk > 0 && chunk < bytes ? static_cast<uint32_t>(chunk) : bytes;
      const uint32_t pieces = (bytes + piece - 1) / piece;
      for (uint32_t c = (lane + 32 - first % 32) % 32; c < pieces; c += 32)
        bulk_copy_g2s(static_cast<unsigned char*>(dst) + size_t{c} * piece,
                  static_cast<const unsigned char*>(src) + size_t{c} * piece,
                  min(piece, bytes - c * piece), bar);
      return first + pieces;
    };
    uint32_t issued = 0;
    if (jn > 0) {
      issued = issue(sg, w_gate + j0 * d, gate_bytes, &bars[0], issued);
      issued = issue(su, w_up + j0 * d, gate_bytes, &bars[0], issued);
    }
    if (rn > 0) issue(sd, w_down + r0 * f, down_bytes, &bars[1], issued);
  }
  pdl_wait();

  // A: s = x + delta, xn = rmsnorm(s) * mlp_norm (add_rmsnorm's formulas), in every block.
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += nthreads) {
    const float v = x[i] + delta[i];
    ss[i] = v;
    sq += v * v;
  }
  const float inv = 1.0f / sqrtf(block_sum(sq, part) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += nthreads) {
    const float v = to_f32(mlp_norm[i]) * (ss[i] * inv);
    sxn[i] = v;
    // The last layer (no next norm) leaves the MLP norm's output in xn, as the composition does.
    if (!next_norm && blockIdx.x == 0) xn[i] = v;
  }
  __syncthreads();  // sxn complete; also orders the barrier init before any wait
  if (lsu) {
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
  }
  if (jn > 0) {
    if (!lsu) mbar_wait(&bars[0], 0);
    for (int64_t jj = warp; jj < jn; jj += nwarps) {
      const float g = warp_dot_smem(sg + jj * d, sxn, d / 8);
      const float u = warp_dot_smem(su + jj * d, sxn, d / 8);
      if (lane == 0) h[j0 + jj] = g / (1.0f + expf(-g)) * u;  // as swiglu_kernel
    }
  }

  // Grid barrier: every block's h slice is written (and every block has read x and delta).
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(&sync[0], 1u);
    while (load_acquire(&sync[0]) < gridDim.x) __nanosleep(20);
  }
  __syncthreads();
  // Every block is resident now: the next kernel may start its pre-wait loads beside this one.
  pdl_trigger();

  // B: x[r] = s[r] + h . Wd[r] for this block's rows.
  if (rn > 0) {
    for (int64_t i = threadIdx.x; i < f; i += nthreads) sh[i] = __ldcg(h + i);
    if (lsu) asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();  // sh complete, and (LSU) every thread's down pieces landed
    if (!lsu) mbar_wait(&bars[1], 0);
    for (int64_t rr = warp; rr < rn; rr += nwarps) {
      const float p = warp_dot_smem(sd + rr * f, sh, f / 8);
      if (lane == 0) x[r0 + rr] = ss[r0 + rr] + p;
    }
  }

  // Tail: the last block to finish normalizes the new residual for the next layer.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&sync[1], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (next_norm) {
    sq = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += nthreads) {
      const float v = __ldcg(x + i);
      ss[i] = v;
      sq += v * v;
    }
    const float inv2 = 1.0f / sqrtf(block_sum(sq, part) / static_cast<float>(d) + eps);
    for (int64_t i = threadIdx.x; i < d; i += nthreads)
      xn[i] = to_f32(next_norm[i]) * (ss[i] * inv2);
  }
  if (threadIdx.x == 0) {  // every block has passed the barrier and arrived: reset for next time
    sync[0] = 0;
    sync[1] = 0;
  }
}

template <typename W>
void residual_mlp_typed(const ResidualMlpArgs& a, cudaStream_t s) {
  auto kernel = residual_mlp_kernel<W>;
  const size_t smem =
      static_cast<size_t>(residual_mlp_smem_bytes(a.d, a.f, a.gate_rows, a.down_rows));
  launch_pdl(kernel, dim3(static_cast<unsigned>(a.blocks)), dim3(static_cast<unsigned>(a.threads)),
             smem, s, a.x, a.delta, static_cast<const W*>(a.mlp_norm),
             static_cast<const __nv_bfloat16*>(a.w_gate), static_cast<const __nv_bfloat16*>(a.w_up),
             static_cast<const __nv_bfloat16*>(a.w_down), static_cast<const W*>(a.next_norm), a.xn,
             a.h, a.sync, a.d, a.f, a.gate_rows, a.down_rows, a.chunk, a.lsu,
             static_cast<float>(a.eps));
}

// The kernel may take up to `bytes` of dynamic shared memory (always the device's limit, so that
// one shape's launch never lowers what another's needs) and prefers the largest carveout, as the
// batch-1 GEMV beside it does under kTuneMaxSharedCarveout.
template <typename W>
void allow_smem(int bytes) {
  cudaError_t err = cudaFuncSetAttribute(residual_mlp_kernel<W>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess)
    err =
        cudaFuncSetAttribute(residual_mlp_kernel<W>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
  if (err != cudaSuccess) throw std::runtime_error(cudaGetErrorString(err));
}

}  // namespace

int64_t residual_mlp_smem_bytes(int64_t d, int64_t f, int64_t gate_rows, int64_t down_rows) {
  return 2 * gate_rows * d * 2 + down_rows * f * 2 + (2 * d + f) * 4;
}

int64_t residual_mlp_max_blocks(int64_t smem_bytes, int64_t threads, ElemType norm_type) {
  int device = 0, sms = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess)
    return 0;
  // Static shared memory (barriers, partial sums) comes on top of the dynamic part.
  const int limit = optin - 256;
  if (smem_bytes > limit) return 0;
  const int bytes = static_cast<int>(smem_bytes);
  int per_sm = 0;
  cudaError_t err = cudaSuccess;
  switch (norm_type) {
    case ElemType::F32:
      allow_smem<float>(limit);
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, residual_mlp_kernel<float>,
                                                          static_cast<int>(threads), bytes);
      break;
    case ElemType::F16:
      allow_smem<__half>(limit);
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, residual_mlp_kernel<__half>,
                                                          static_cast<int>(threads), bytes);
      break;
    case ElemType::BF16:
      allow_smem<__nv_bfloat16>(limit);
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, residual_mlp_kernel<__nv_bfloat16>, static_cast<int>(threads), bytes);
      break;
  }
  if (err != cudaSuccess) return 0;
  return static_cast<int64_t>(per_sm) * sms;
}

void launch_residual_mlp(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const ResidualMlpArgs*>(p);
  switch (a.norm_type) {
    case ElemType::F32:
      return residual_mlp_typed<float>(a, s);
    case ElemType::F16:
      return residual_mlp_typed<__half>(a, s);
    case ElemType::BF16:
      return residual_mlp_typed<__nv_bfloat16>(a, s);
  }
}

}  // namespace infera::cuda
