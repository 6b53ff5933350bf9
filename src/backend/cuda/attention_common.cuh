// What the attention kernels share: the visible key range of a query, the paged-cache address of
// a key, and the merge of split-key partial results.
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/kernels.h"

namespace infera::cuda {

// Keys [lo, hi) that a query at `pos` of a sequence of `len` keys may see (Backend::attention).
__device__ __forceinline__ void key_range(const AttentionArgs& a, int pos, int len, int& lo,
                                          int& hi) {
  hi = a.causal ? pos + 1 : len;
  lo = 0;
  if (a.window >= 0) {
    lo = max(0, pos - static_cast<int>(a.window));
    hi = min(hi, pos + static_cast<int>(a.window) + 1);
  }
  hi = min(hi, len);
}

// Element offset of key `t` of sequence `b`, kv head `g`, in the pools.
// (32-bit division: the 64-bit one is emulated and cost more than the tile's matrix work; a shift
// for power-of-two block sizes, the usual case, where the division was a sizable share of a
// decode key's instructions.)
__device__ __forceinline__ int64_t key_offset(const AttentionArgs& a, int b, int g, int t) {
  const int bs = static_cast<int>(a.block_size);
  const int blk = (bs & (bs - 1)) == 0 ? t >> (__ffs(bs) - 1) : t / bs;
  const int64_t block = a.block_table[static_cast<int64_t>(b) * a.max_blocks + blk];
  return ((g * a.num_blocks + block) * a.block_size + (t - blk * bs)) * a.head_dim;
}

// Query vector v of a tile (sequence rows x group heads, row-major) -> its row and q head.
__device__ __forceinline__ void vector_row_head(const AttentionArgs& a, int row_begin, int g, int v,
                                                int& row, int& head) {
  const int group = static_cast<int>(a.hq / a.hkv);
  row = row_begin + v / group;
  head = g * group + v % group;
}

// Called by every thread of a block that has written its split's partial results (partial_out,
// partial_ml) for query vectors [v0, v0 + nv) of sequence b, kv head g: the block that finishes
// its tile's last split merges all of them into out (no second kernel). Each block publishes its
// partials, then counts itself done; the one that brings the count to `splits` sees every other
// block's partials and resets the counter for the next launch (graph replays).
// Returns whether this block merged (then every other block of the tile has finished).
__device__ inline bool merge_splits_if_last(const AttentionArgs& a, int b, int g, int v0, int nv,
                                            int row_begin) {
  __shared__ __align__(16) int merge_flag[4];  // [0] used; padded as attention_decode.cu says
  int& merge = merge_flag[0];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int64_t tile = (static_cast<int64_t>(b) * a.hkv + g) * gridDim.x + blockIdx.x;
    merge = atomicAdd(&a.split_counters[tile], 1u) == static_cast<unsigned>(a.splits - 1);
    if (merge) a.split_counters[tile] = 0;
  }
  __syncthreads();
  if (!merge) return false;
  __threadfence();
  const int d = static_cast<int>(a.head_dim);
  const int64_t stride = a.num_tokens * a.hq;
  for (int i = threadIdx.x; i < nv * d; i += blockDim.x) {
    const int v = i / d, e = i % d;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    const int64_t vec = static_cast<int64_t>(row) * a.hq + head;
    // out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s; L2 reads (other blocks wrote them).
    // Unrolled so that each pass issues its loads together: a rolled loop waits for one L2
    // round trip per split (the suspected bulk of batch-1 decode attention).
    const int splits = static_cast<int>(a.splits);
    float m = -INFINITY;
#pragma unroll 8
    for (int sp = 0; sp < splits; ++sp)
      m = fmaxf(m, __ldcg(a.partial_ml + 2 * (sp * stride + vec)));
    float l = 0.0f, o = 0.0f;
    if (m != -INFINITY) {
#pragma unroll 8
      for (int sp = 0; sp < splits; ++sp) {
        const float2 ml = __ldcg(reinterpret_cast<const float2*>(a.partial_ml) + sp * stride + vec);
        const float po = __ldcg(a.partial_out + (sp * stride + vec) * d + e);
        const float f = ml.x == -INFINITY ? 0.0f : expf(ml.x - m);
        l += f * ml.y;
        o += f * po;
      }
    }
    const float r = l > 0.0f ? o / l : 0.0f;
    a.out[vec * d + e] = r;
    // The staged decode kernel's bf16 shadow (CudaOptions::decode_attention_shadow); null for
    // the other kernels that merge here.
    if (a.out_bf16) static_cast<__nv_bfloat16*>(a.out_bf16)[vec * d + e] = __float2bfloat16(r);
  }
  return true;
}

// The keys this block of a split decode attention reads, into span[0, 2): the key ranges of its
// nv query vectors (vector_row_head, key_range) merged, then the block's share (split of
// a.splits) of whole 32-key tiles of that span, split evenly. Every thread of the block calls it
// (it synchronizes twice); vr and span live in shared memory.
template <int NV>
__device__ __forceinline__ void decode_block_key_span(const AttentionArgs& a, int row_begin, int g,
                                                      int nv, int len, int split, int (&vr)[NV][2],
                                                      int (&span)[4]) {
  const int tid = threadIdx.x;
  if (tid < NV) {
    int lo = 0, hi = 0;
    if (tid < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, tid, row, head);
      key_range(a, a.positions[row], len, lo, hi);
    }
    vr[tid][0] = lo;
    vr[tid][1] = hi;
  }
  __syncthreads();
  if (tid == 0) {
    int lo = len, hi = 0;
    for (int v = 0; v < nv; ++v) {
      lo = min(lo, vr[v][0]);
      hi = max(hi, vr[v][1]);
    }
    const int width = max(hi - lo, 0), splits = static_cast<int>(a.splits);
    const int per = ((width + splits - 1) / splits + 31) / 32 * 32;
    span[0] = min(hi, lo + split * per);
    span[1] = min(hi, lo + (split + 1) * per);
  }
  __syncthreads();
}

}  // namespace infera::cuda
