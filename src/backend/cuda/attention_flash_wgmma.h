// Paged prefill attention on Hopper's warpgroup MMA (attention_flash_wgmma.cu,
// CudaOptions::flash_wgmma), and the encoders' packed attention on it (attention_packed_wgmma.cu,
// CudaOptions::packed_wgmma). Kept out of kernels.h so that adding it rebuilds only its users.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace infera::cuda {

// Query vectors a block, AttentionArgs::vectors_per_tile for this kernel: 2 warpgroups of 64
// each, or (kFlashWgmmaSmallVectors) 2 warpgroups on the same 64 with each key tile's halves
// split between them.
constexpr int64_t kFlashWgmmaVectors = 128, kFlashWgmmaSmallVectors = 64;
// Whether the kernel runs on a device of compute capability sm_major.sm_minor (9.0: the binary's
// sm_90a code) for this cache type, head_dim and paged pool (a power-of-two block size, a kv
// head's num_blocks x block_size x head_dim elements addressable in int32). Paged attention only.
bool attention_flash_wgmma_supports(ElemType type, int64_t head_dim, int64_t block_size,
                                    int64_t num_blocks, int sm_major, int sm_minor);
// Grid (hkv, sequences, tiles of kFlashWgmmaVectors vectors); AttentionArgs as the flash kernels
// (fast_softmax's base-2 softmax, no split), out and the optional out_bf16 written;
// AttentionArgs::pipelined: the 64-vector tiles' pipelined loop
// (CudaOptions::flash_wgmma_pipeline). AttentionArgs::tune (the staged decode kernel's bits; this
// kernel has its own): kWgmmaQPrefetch, the queries loaded at the block's start
// (CudaOptions::flash_wgmma_q_prefetch).
constexpr int64_t kWgmmaQPrefetch = 1;
void launch_attention_flash_wgmma(const void* args, cudaStream_t stream);

// The encoders' packed attention on the same kernel (attention_packed_wgmma.cu): `a` as the flash
// kernel's packed mode (no block table; bf16 keys and values [T, hkv, D] of the sequences' own
// rows, key tiles from each sequence's first row, the windowed schedule), vectors_per_tile 64 or
// 128 as above (pipelined: the 64-vector tiles' loop), the queries always loaded at the block's
// start. rope_cos / rope_sin set (RoPE tables [positions][D / 2]; head_dim 64, not pipelined):
// a.q16 and the keys are not yet rotated, and the kernel rotates them at their rows' offsets in
// the sequence, as rope_stage16 would (the same bits).
struct PackedWgmmaArgs {
  AttentionArgs a;
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
};
// Whether it runs on a device of compute capability sm_major.sm_minor (9.0) for this many rows,
// kv heads and head_dim (64 or 128; T x hkv x D elements addressable in int32), and whether its
// RoPE inside applies at this head_dim.
bool attention_packed_wgmma_supports(int64_t tokens, int64_t hkv, int64_t head_dim, int sm_major,
                                     int sm_minor);
bool attention_packed_wgmma_rope_supports(int64_t head_dim);
void launch_attention_packed_wgmma(const void* args, cudaStream_t stream);

// Paged prefill attention with TMA copies by a producer warpgroup and 128-key tiles
// (attention_tma_wgmma.cu, CudaOptions::flash_tma): the same work and arguments as
// launch_attention_flash_wgmma with 128-vector tiles (work items of (kv head, sequence, tile of
// attention_tma_wgmma_vectors() vectors); out and / or out_bf16; q16 where set), the pools read
// through tensor maps made by encode_kv_pool_map. Runs on compute capability 9.0 for head_dim
// 128, f16/bf16 pools of blocks of 8..128 keys (a power of two) whose rows fit int32.
bool attention_tma_wgmma_supports(ElemType type, int64_t head_dim, int64_t hkv, int64_t block_size,
                                  int64_t num_blocks, int sm_major, int sm_minor);
int64_t attention_tma_wgmma_vectors();
// A pool [hkv, num_blocks, block_size, head_dim] as the kernel reads it: boxes of one block's
// rows by 64 dims, 128-byte swizzle. False where the driver refuses it.
bool encode_kv_pool_map(CUtensorMap* map, ElemType type, const void* pool, int64_t hkv,
                        int64_t num_blocks, int64_t block_size, int64_t head_dim);
// AttentionArgs::tune bit of the TMA kernel: its consumer warpgroups take turns at their products
// (CudaOptions::flash_tma_pingpong).
constexpr int64_t kTmaPingPong = 1;
// ... the producer copies the queries (AttentionArgs::q16) with TMA through `queries`, made by
// encode_query_map (CudaOptions::flash_tma_queries).
constexpr int64_t kTmaQueries = 2;
// bf16 queries [tokens, hq, head_dim] (q16) as the kernel reads them: boxes of 64 vectors (64 /
// group rows x group heads) x 64 dims. False for a group that is not 1, 2, 4 or 8, another
// head_dim than 128, a misaligned q16, or where the driver refuses it.
bool encode_query_map(CUtensorMap* map, const void* q16, int64_t tokens, int64_t hq, int64_t group,
                      int64_t head_dim);
struct TmaAttentionArgs {
  AttentionArgs a;
  CUtensorMap keys, values, queries;  // queries: with kTmaQueries only
  // Blocks of the 1D grid over the hkv x sequences x tiles work items: all of them, or at most one
  // an SM (CudaOptions::flash_tma_persistent), each block walking its items in a snake order.
  int64_t grid;
};
void launch_attention_tma_wgmma(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
