// What both attention kernels share: the visible key range of a query, the paged-cache address of
// a key.
#pragma once

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
// (32-bit division: the 64-bit one is emulated and cost more than the tile's matrix work.)
__device__ __forceinline__ int64_t key_offset(const AttentionArgs& a, int b, int g, int t) {
  const int bs = static_cast<int>(a.block_size), blk = t / bs;
  const int64_t block = a.block_table[static_cast<int64_t>(b) * a.max_blocks + blk];
  return ((block * a.hkv + g) * a.block_size + (t - blk * bs)) * a.head_dim;
}

// Query vector v of a tile (sequence rows x group heads, row-major) -> its row and q head.
__device__ __forceinline__ void vector_row_head(const AttentionArgs& a, int row_begin, int g, int v,
                                                int& row, int& head) {
  const int group = static_cast<int>(a.hq / a.hkv);
  row = row_begin + v / group;
  head = g * group + v % group;
}

}  // namespace infera::cuda
