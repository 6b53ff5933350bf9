// The flash kernels' key-split epilogue (attention_flash.cu, attention_flash_wide.cu): a chunk's
// partial results out, and the merge of a query tile's chunks by the tile's last block.
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/attention_common.cuh"

namespace infera::cuda::flash {

// A chunk's rows to the partials at chunk `split`: unnormalised output and (max, sum); then, in
// the tile's last block to finish, out (and out_bf16) = the merge of the tile's `chunks`
// partials: sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s (base e without kFast).
// The block has kThreadsT threads (kThreadsT / 32 warps) and kVec query vectors; warp w holds
// kMt 16-row mma tiles, tile mt's rows r0 = w * 16 * kMt + mt * 16 + gid and r1 = r0 + 8:
// o[(mt * D / 8 + dt) * 4 + j] is the m16n8 accumulator fragment of dims dt * 8..+7, and
// ml[mt * 4 + 0..3] is (m0, m1, l0, l1) (the quad's full sums).
// Each block publishes its partials before it counts itself done; the block that brings the count
// to `chunks` sees every other block's partials and resets the counter for the next launch. The
// merge is latency-bound (a few L2 round trips on the tile's critical path), so its loads are
// issued together: the chunks' factors first (staged in `smem`, a free key buffer of at least
// (2 * chunks + 1) * kVec floats), then per chunk one 16-byte load of each of the thread's
// output quads.
template <int D, bool kFast, int kVec, int kThreadsT, int kMt>
__device__ __forceinline__ void write_and_merge_split(const AttentionArgs& a, int b, int g,
                                                      int tile, int split, int chunks, int v0,
                                                      int nv, int row_begin, const float* o,
                                                      const float* ml, float* smem) {
  __shared__ int merge;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, gid = lane / 4, tig = lane % 4;
  const int64_t stride = a.num_tokens * a.hq;  // vectors per chunk of the partials
  const auto vector_index = [&](int v) {
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    return static_cast<int64_t>(row) * a.hq + head;
  };
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int v = warp * 16 * kMt + mt * 16 + gid + half * 8;
      if (v >= nv) continue;
      const int64_t vec = split * stride + vector_index(v);
      float* dst = a.partial_out + vec * D;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const float* f = o + (mt * (D / 8) + dt) * 4 + 2 * half;
        __stcg(reinterpret_cast<float2*>(dst + dt * 8 + tig * 2), make_float2(f[0], f[1]));
      }
      if (tig == 0)
        __stcg(reinterpret_cast<float2*>(a.partial_ml) + vec,
               make_float2(ml[mt * 4 + half], ml[mt * 4 + 2 + half]));
    }
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const int64_t counter = (static_cast<int64_t>(b) * a.hkv + g) * a.tiles + tile;
    merge = atomicAdd(&a.split_counters[counter], 1u) == static_cast<unsigned>(chunks - 1);
    if (merge) a.split_counters[counter] = 0;
  }
  __syncthreads();
  if (!merge) return;
  __threadfence();
  // smem: [kVec][chunks] maxima, then factors; [kVec] sums' inverses after them.
  float* factor = smem;
  float* inv = smem + kVec * chunks;
  for (int i = tid; i < nv * chunks; i += kThreadsT) {
    const int v = i / chunks, sp = i % chunks;
    const float2 m_l =
        __ldcg(reinterpret_cast<const float2*>(a.partial_ml) + sp * stride + vector_index(v));
    factor[i] = m_l.x;
    inv[kVec + i] = m_l.y;  // sums, past the inverses
  }
  __syncthreads();
  for (int v = tid; v < nv; v += kThreadsT) {
    float m = -INFINITY, l = 0.0f;
    for (int sp = 0; sp < chunks; ++sp) m = fmaxf(m, factor[v * chunks + sp]);
    for (int sp = 0; sp < chunks; ++sp) {
      const float ms = factor[v * chunks + sp];
      const float f = ms == -INFINITY ? 0.0f : (kFast ? exp2f(ms - m) : expf(ms - m));
      factor[v * chunks + sp] = f;
      l += f * inv[kVec + v * chunks + sp];
    }
    inv[v] = l > 0.0f ? 1.0f / l : 0.0f;
  }
  __syncthreads();
  // Each thread's quads in passes of at most 16 (16 float4 accumulators and 16 loads in flight).
  constexpr int kQuads = D / 4, kAll = kVec * kQuads / kThreadsT;  // quads per thread
  constexpr int kPer = kAll < 16 ? kAll : 16, kPasses = kAll / kPer;
  static_assert(kVec * kQuads % kThreadsT == 0 && kAll % kPer == 0);
#pragma unroll 1
  for (int pass = 0; pass < kPasses; ++pass) {
    const int first = tid + pass * kPer * kThreadsT;  // the pass's first quad of this thread
    float4 acc[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sp = 0; sp < chunks; ++sp) {
      float4 po[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int q = first + i * kThreadsT, v = q / kQuads, e = (q % kQuads) * 4;
        po[i] = v < nv ? __ldcg(reinterpret_cast<const float4*>(
                             a.partial_out + (sp * stride + vector_index(v)) * D + e))
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int v = (first + i * kThreadsT) / kQuads;
        const float f = v < nv ? factor[v * chunks + sp] : 0.0f;
        acc[i].x += f * po[i].x;
        acc[i].y += f * po[i].y;
        acc[i].z += f * po[i].z;
        acc[i].w += f * po[i].w;
      }
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int q = first + i * kThreadsT, v = q / kQuads, e = (q % kQuads) * 4;
      if (v >= nv) continue;
      const int64_t vec = vector_index(v);
      const float r = inv[v];
      const float4 y = make_float4(acc[i].x * r, acc[i].y * r, acc[i].z * r, acc[i].w * r);
      float2* dst = reinterpret_cast<float2*>(a.out + vec * D + e);  // out is 8-byte aligned
      dst[0] = make_float2(y.x, y.y);
      dst[1] = make_float2(y.z, y.w);
      if (a.out_bf16) {
        auto* dst16 = static_cast<__nv_bfloat16*>(a.out_bf16) + vec * D + e;
        reinterpret_cast<__nv_bfloat162*>(dst16)[0] = __floats2bfloat162_rn(y.x, y.y);
        reinterpret_cast<__nv_bfloat162*>(dst16)[1] = __floats2bfloat162_rn(y.z, y.w);
      }
    }
  }
}

}  // namespace infera::cuda::flash
