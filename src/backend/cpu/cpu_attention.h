// Raw-pointer attention and cache-write kernels of the CPU backend (the backend checks shapes and
// the batch has been validated, so indices here are trusted).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "infera/tensor.h"
#include "ops/batch.h"

namespace infera::cpu {

// One layer's paged pools: [kv_heads, num_blocks, block_size, head_dim] (see KvLayer).
template <typename Pointer>
struct PagedPools {
  Pointer keys, values;
  DType dtype;
  int64_t kv_heads, num_blocks, block_size, head_dim;
  // Byte offset of slot `offset` of block `block`, kv head g.
  int64_t byte_offset(int64_t g, int64_t block, int64_t offset) const {
    return ((g * num_blocks + block) * block_size + offset) * head_dim *
           static_cast<int64_t>(dtype_bytes(dtype, 1));
  }
};
using PagedKv = PagedPools<const void*>;

// v grown to at least n elements (never shrunk): the attention kernels' thread-local buffers,
// sized to a batch's largest work item before a thread takes any, so that a batch seen before
// allocates nothing whichever thread takes which item.
template <typename T>
void grow_to(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Rows of k and v ([n, kv_heads, head_dim] F32) to their slots, converted to the pool's dtype.
void kv_write(const float* k, const float* v, int64_t n, const int32_t* slots,
              const PagedPools<void*>& pools);

// Whether attention_paged takes a decode row's kv heads two at a time, their key passes key by
// key in turn (matmul_rows_pair: two streams in flight on the thread, where one core's misses in
// flight on one stream bound the pass). The same results. INFERA_CPU_ATTN_PAIRED_HEADS=0|1 (read
// once; anything else throws InvalidArgument naming it); default on.
bool attention_paired_heads();
void set_attention_paired_heads(bool on);  // tests, benchmarks

// q, out [T, hq, head_dim]; see Backend::attention.
void attention_paged(ThreadPool& pool, const float* q, int64_t hq, const PagedKv& kv,
                     const BatchDesc& batch, const AttentionParams& params, float* out);

// Tile sizes of attention_packed: query rows per work item, keys per score block.
constexpr int64_t kPackedQueryTile = 32;
constexpr int64_t kPackedKeyTile = 32;  // = kScoreTileKeys of the score kernel

// q, out [T, hq, d]; k, v [T, hkv, d]; see Backend::attention_packed. With `window_tiles` false,
// every query tile visits every key tile of its sequence (the dense baseline; same result).
// `kv_scratch` is reused across calls. Returns the (query tile, kv head, key tile) blocks computed.
int64_t attention_packed(ThreadPool& pool, const float* q, const float* k, const float* v,
                         int64_t hq, int64_t hkv, int64_t d, const BatchDesc& batch,
                         const AttentionParams& params, bool window_tiles, float* out,
                         std::vector<float>& kv_scratch);

}  // namespace infera::cpu
