// Weight-streaming tensor-core GEMM for decode batches (issue 11, session 10):
// out[n, m] = x[n, k] . W[m, k]^T, bf16 W (row-major m x k) and bf16 x, f32 accumulate, f32 out,
// for n = 1..256. The weights are the bytes that matter (x is at most 256 rows), so the kernel is
// shaped around streaming W once at HBM speed with as little per-CTA overhead as possible:
// - W is the wgmma M side (64 weight rows per consumer warpgroup) and x the N side (n padded to
//   NT, a multiple of 8), so a small n wastes nothing on the weight side;
// - one producer thread issues one TMA bulk tensor copy of the W tile and one of the x tile per
//   64-wide k chunk (128-byte swizzle) into a STAGES-deep shared-memory ring guarded by
//   mbarriers, instead of per-thread cp.async address arithmetic (session 6's limiter);
// - the k chunks are split over the CTAs of a thread-block cluster when the m tiles alone do not
//   fill the SMs; the partial tiles are added through distributed shared memory in rank order
//   (deterministic, no workspace, no second kernel) and written with coalesced 16-byte stores;
// - programmatic dependent launch: the first stages' W loads are issued before
//   griddepcontrol.wait (W does not depend on the previous kernel; x and out do).
// Zero fill of the TMA boxes covers m not a multiple of 64, k not a multiple of 64 and n < NT.
// Requirements (checked by the host side): k % 8 == 0 (TMA's 16-byte stride rule), W and x
// 16-byte aligned, x row stride a multiple of 8 elements.
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/stream_gemm_wgmma.cuh"

namespace infera::cuda::sgemm {

constexpr int kBK = 64;         // k per stage: 64 bf16 = 128 bytes, one 128-byte swizzle row
constexpr int kRowsPerWG = 64;  // wgmma's M: weight rows per consumer warpgroup
constexpr int kMaxSplits = 8;   // the portable cluster size
// Shared memory per CTA, at most: two CTAs per SM (228 KB), so that every cluster of a one-wave
// grid is resident at once (clusters must fit inside a GPC; at one CTA per SM some 8-CTA
// clusters waited for a second wave: the probe's 2x jump from 32 to 64 rows) and the next
// PDL-launched GEMM's CTAs can prefetch beside ours.
constexpr int kCtaSmemBudget = 110 * 1024;

// Up to three weights sharing x in one launch (q/k/v: their m tiles one after another along
// grid x), or gate/up with glu: both 64-row tiles in one CTA (warpgroup 0 gate, 1 up) and
// out[0] = silu(x . gate^T) * (x . up^T) in the epilogue (kGluGelu: gelu(x . w0^T) * (x . w1^T),
// ModernBERT's GeGLU), also as bf16 into out_bf16 (the down projection's input) when that is set;
// out[1] is then untouched, and out[0] may be null where only the bf16 copy is wanted.
constexpr int kMaxSegments = 3;
constexpr int kGluSilu = 1, kGluGelu = 2;  // StreamGemmParams::glu
struct StreamMaps {
  CUtensorMap w[kMaxSegments];  // box: (WG or, with glu, 1) x 64 rows x kBK
  CUtensorMap x;                // box: NT rows x kBK
};
struct StreamGemmParams {
  float* out[kMaxSegments];
  int64_t ldo[kMaxSegments];  // out row strides, in floats
  int m[kMaxSegments];
  int tile_end[kMaxSegments];  // cumulative m tiles through each segment
  __nv_bfloat16* out_bf16;     // glu only; may be null
  int n;
  int glu;               // 0, kGluSilu or kGluGelu
  int k_chunks;          // ceil(k / kBK)
  int chunks_per_split;  // k chunks per CTA of a cluster
  int vec_out;           // every out and ldo allow float4 stores
};

template <int NT, int WG, int STAGES>
struct StreamLayout {
  static constexpr int kWBytes = WG * kRowsPerWG * kBK * 2;
  static constexpr int kXBytes = NT * kBK * 2;
  static constexpr int kStageBytes = kWBytes + kXBytes;  // a multiple of 1024 (swizzle atom)
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  // Split-k receive buffer: rank r owns x rows [r * rows_per, (r + 1) * rows_per) (rows_per a
  // multiple of 8) and holds every rank's partial of them as recv[q * rows_per + row][m]. Pitch
  // WG * 64 + 4 floats so the fragment stores spread over the 32 banks.
  static constexpr int kLd = WG * kRowsPerWG + 4;
  static constexpr int kRecvRows = (NT + 8 * kMaxSplits - 1) / (8 * kMaxSplits) * (8 * kMaxSplits);
  static constexpr int kRecvBytes = kRecvRows * kLd * 4;
  // Beside the ring when both fit the per-CTA budget (partials may then be pushed while other
  // ranks still stream), else over it behind one more cluster barrier.
  static constexpr bool kSeparateRecv = kPipeBytes + kRecvBytes <= kCtaSmemBudget;
  static constexpr int kRecvOffset = kSeparateRecv ? kPipeBytes : 0;
  static constexpr int kBarOffset =
      kSeparateRecv ? kPipeBytes + kRecvBytes : (kPipeBytes > kRecvBytes ? kPipeBytes : kRecvBytes);
  static constexpr int kSmemBytes = kBarOffset + 2 * STAGES * 8 + 1024;  // + alignment slack
  static constexpr int kThreads = WG * 128 + 32;  // consumer warpgroups, then one producer warp
  static_assert(NT % 8 == 0 && NT >= 8 && NT <= 256, "wgmma N");
  static_assert(kXBytes % 1024 == 0, "x tile must keep the 1024-byte swizzle alignment");
  static_assert(kBarOffset <= kCtaSmemBudget, "over the shared-memory budget");
};

// Shared-memory matrix descriptor for a K-major tile with 128-byte swizzle: rows of 128 bytes,
// 8-row (1024-byte) swizzle atoms stacked along M/N (stride byte offset 1024); the leading
// byte offset is unused for swizzled K-major layouts. Advancing k by 16 elements = +32 bytes.
__device__ __forceinline__ uint64_t sw128_desc(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

template <int NT, int WG, int STAGES>
__global__ void __launch_bounds__(StreamLayout<NT, WG, STAGES>::kThreads, 1)
    stream_gemm_kernel(const __grid_constant__ StreamMaps maps, const StreamGemmParams p) {
  // wgmma exists only in the sm_90a machine code; the compute_90 PTX (for newer GPUs) traps,
  // and the host side offers this kernel only on compute capability 9.0.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = StreamLayout<NT, WG, STAGES>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kBarOffset);
  uint64_t* empty = full + STAGES;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int seg = blockIdx.x < p.tile_end[0] ? 0 : blockIdx.x < p.tile_end[1] ? 1 : 2;
  const int m0 = (blockIdx.x - (seg ? p.tile_end[seg - 1] : 0)) * (p.glu ? 1 : WG) * kRowsPerWG;
  const CUtensorMap* tm_w = &maps.w[seg];
  const CUtensorMap* tm_x = &maps.x;
  // Weight tile of one stage: one box of WG x 64 rows, or with glu gate's and up's 64 rows.
  auto load_w = [&](unsigned char* st, uint64_t* bar, int k0) {
    if (WG == 2 && p.glu) {
      tma_load_2d(st, &maps.w[0], bar, k0, m0);
      tma_load_2d(st + kRowsPerWG * kBK * 2, &maps.w[1], bar, k0, m0);
    } else {
      tma_load_2d(st, tm_w, bar, k0, m0);
    }
  };
  const int c_begin = blockIdx.y * p.chunks_per_split;
  const int c_end = min(p.k_chunks, c_begin + p.chunks_per_split);
  const int nchunks = max(0, c_end - c_begin);

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], WG * 4);  // one arrive per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  // Let the next kernel's CTAs start (they fire once every CTA of this grid has come here, so
  // they cannot take the place of one of ours): a PDL-launched stream_gemm then prefetches its
  // weights into the shared memory this one leaves free while this one finishes.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // First phase of the cluster barrier: arrive now, wait just before the partials are pushed,
  // so no CTA writes into another's shared memory before that one has started (racecheck).
  if (gridDim.y > 1) asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");

  float acc[NT / 2];
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) acc[i] = 0.f;

  if (warp == WG * 4) {
    // Producer: one thread. W first (independent of the previous kernel), then x after the
    // dependency wait.
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tm_w)));
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tm_x)));
      const int pre = min(nchunks, STAGES);
      for (int i = 0; i < pre; ++i) {
        unsigned char* st = smem + i * L::kStageBytes;
        mbar_expect_tx(&full[i], L::kStageBytes);
        load_w(st, &full[i], (c_begin + i) * kBK);
      }
      asm volatile("griddepcontrol.wait;\n" ::: "memory");
      for (int i = 0; i < pre; ++i)
        tma_load_2d(smem + i * L::kStageBytes + L::kWBytes, tm_x, &full[i], (c_begin + i) * kBK, 0);
      for (int i = pre; i < nchunks; ++i) {
        const int s = i % STAGES;
        mbar_wait(&empty[s], ((i / STAGES) - 1) & 1);
        unsigned char* st = smem + s * L::kStageBytes;
        mbar_expect_tx(&full[s], L::kStageBytes);
        load_w(st, &full[s], (c_begin + i) * kBK);
        tma_load_2d(st + L::kWBytes, tm_x, &full[s], (c_begin + i) * kBK, 0);
      }
    }
  } else {
    const int g = warp / 4;  // this warpgroup's 64 weight rows of the tile
    for (int i = 0; i < nchunks; ++i) {
      const int s = i % STAGES;
      mbar_wait(&full[s], (i / STAGES) & 1);
      unsigned char* st = smem + s * L::kStageBytes;
      const uint64_t da = sw128_desc(st + g * kRowsPerWG * kBK * 2);
      const uint64_t db = sw128_desc(st + L::kWBytes);
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) Wgmma<NT>::run(acc, da + 2 * kk, db + 2 * kk);
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
      for (int r = 0; r < NT / 2; ++r) asm volatile("" : "+f"(acc[r])::"memory");
      if (lane == 0) mbar_arrive(&empty[s]);
    }
  }

  // Everything this kernel reads from the previous one has landed; out may now be written.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");

  // Epilogue. Each rank pushes its partial rows to their owner's receive buffer (remote stores
  // need no round trip), one cluster barrier, then every owner adds its rows' partials in rank
  // order (deterministic) and stores them along m, 16 bytes per thread.
  namespace cg = cooperative_groups;
  const int splits = gridDim.y;
  const int rank = blockIdx.y;  // cluster dims (1, splits, 1) over grid (m tiles, splits)
  auto cluster_or_cta_sync = [&] {
    if (splits > 1)
      cg::this_cluster().sync();
    else
      __syncthreads();
  };
  if (splits > 1) asm volatile("barrier.cluster.wait;\n" ::: "memory");
  if (!L::kSeparateRecv) cluster_or_cta_sync();  // every ring of the cluster is past its last use
  float* recv = reinterpret_cast<float*>(smem + L::kRecvOffset);
  const int rows_per = ((p.n + splits - 1) / splits + 7) / 8 * 8;
  if (splits * rows_per > L::kRecvRows) __trap();  // the host chooses splits so that it fits
  if (warp < WG * 4) {
    const int row = warp * 16 + lane / 4;  // = g * 64 + (warp % 4) * 16 + lane / 4
#pragma unroll
    for (int j = 0; j < NT / 8; ++j) {
      if (8 * j >= p.n) break;
      const int owner = 8 * j / rows_per;
      float* dst = splits > 1 ? cg::this_cluster().map_shared_rank(recv, owner) : recv;
      dst += (rank * rows_per + 8 * j - owner * rows_per + 2 * (lane % 4)) * L::kLd + row;
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int c = 0; c < 2; ++c) dst[c * L::kLd + 8 * i] = acc[j * 4 + i * 2 + c];
    }
  }
  cluster_or_cta_sync();
  const int r0 = rank * rows_per, r1 = min(p.n, r0 + rows_per);
  float* const out = p.out[seg];
  const int64_t ldo = p.ldo[seg];
  const int m = p.m[seg];
#ifndef STREAM_GEMM_PLANT  // a planted bug for the tests to catch: the last rank's partial lost
#define STREAM_GEMM_PLANT 0
#endif
  auto reduce4 = [&](int lr, int c) {
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int q = 0; q < splits - STREAM_GEMM_PLANT; ++q) {  // rank order: the same every run
      const float4 v = *reinterpret_cast<const float4*>(recv + (q * rows_per + lr) * L::kLd + c);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    return sum;
  };
  auto store4 = [&](float* o, int col, float4 v) {
    if (p.vec_out && col + 4 <= m) {
      *reinterpret_cast<float4*>(o) = v;
    } else {
      const float v4[4] = {v.x, v.y, v.z, v.w};
      for (int t = 0; t < 4; ++t)
        if (col + t < m) o[t] = v4[t];
    }
  };
  if (WG == 2 && p.glu) {  // columns [0, 64) gate, [64, 128) up
    constexpr int kCols4 = kRowsPerWG / 4;
    for (int e = tid; e < (r1 - r0) * kCols4; e += L::kThreads) {
      const int lr = e / kCols4, c = (e % kCols4) * 4;
      const float4 g = reduce4(lr, c), u = reduce4(lr, c + kRowsPerWG);
      const auto act = [&](float v, float up) {
        return p.glu == kGluGelu ? gelu_erf(v) * up : v / (1.0f + expf(-v)) * up;
      };
      const float4 h = make_float4(act(g.x, u.x), act(g.y, u.y), act(g.z, u.z), act(g.w, u.w));
      if (out) store4(out + (r0 + lr) * ldo + m0 + c, m0 + c, h);
      if (p.out_bf16) {
        __nv_bfloat16* ob = p.out_bf16 + (r0 + lr) * int64_t{m} + m0 + c;
        const float h4[4] = {h.x, h.y, h.z, h.w};
        for (int t = 0; t < 4; ++t)
          if (m0 + c + t < m) ob[t] = __float2bfloat16(h4[t]);
      }
    }
  } else {
    constexpr int kCols4 = WG * kRowsPerWG / 4;
    for (int e = tid; e < (r1 - r0) * kCols4; e += L::kThreads) {
      const int lr = e / kCols4, c = (e % kCols4) * 4;
      store4(out + (r0 + lr) * ldo + m0 + c, m0 + c, reduce4(lr, c));
    }
  }
#else
  __trap();
#endif
}

}  // namespace infera::cuda::sgemm
