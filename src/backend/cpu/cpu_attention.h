// Raw-pointer attention and cache-write kernels of the CPU backend (the backend checks shapes and
// the batch has been validated, so indices here are trusted).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "infera/tensor.h"
#include "ops/batch.h"

namespace infera::cpu {

// One layer's paged pools as attention reads them: [num_blocks, kv_heads, block_size, head_dim].
struct PagedKv {
  const void* keys;
  const void* values;
  DType dtype;
  int64_t kv_heads, block_size, head_dim;
};

// Rows of k and v ([n, kv_heads, head_dim] F32) to their slots, converted to the pool's dtype.
void kv_write(const float* k, const float* v, int64_t n, const int32_t* slots, void* key_pool,
              void* value_pool, DType dtype, int64_t kv_heads, int64_t block_size,
              int64_t head_dim);

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
