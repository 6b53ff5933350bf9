// The launch record of the one-kernel decoder stack for one decode row (decode_stack.cu), in its
// own header so that the other kernel files do not depend on it. Conventions as kernels.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace infera::cuda {

// One layer's device pointers: bf16 weights in the Hugging Face layouts and the layer's bf16
// pools [kv_heads, num_blocks, block_size, head_dim]. The kernel reads an array of these.
struct DecodeStackLayer {
  const void *attn_norm, *wq, *wk, *wv, *q_norm, *k_norm, *wo, *mlp_norm, *wg, *wu, *wd;
  void *keys, *values;
};

// Backend::decoder_stack of one row of one sequence as one kernel: every layer's norm + q/k/v,
// qk-norm + RoPE + cache write, causal attention over the cache, o projection + residual, norm +
// gate/up + SwiGLU, down projection + residual, with grid barriers between the phases. The grid
// (`blocks`, one per SM) must be co-resident. Limits the host checks (decode_stack_fits):
// decode_stack_limits below.
struct DecodeStackArgs {
  const DecodeStackLayer* layers;  // device array [num_layers]
  float* x;                        // [d] the residual stream, in and out
  float* qkv;                      // [(hq + 2 hkv) head_dim] scratch
  float* attn;                     // [hq head_dim] scratch
  float* h;                        // [f] scratch
  float* partial_ml;               // [splits, hq, 2] scratch
  float* partial_out;              // [splits, hq, head_dim] scratch
  unsigned* sync;                  // [2 + hkv] zeroed counters, left zero
  const int32_t* positions;        // the batch's (one row)
  const int32_t* slots;
  const int32_t* seq_lens;
  const int32_t* block_table;
  const float* cos;  // RoPE tables [positions, head_dim / 2]
  const float* sin;
  int64_t num_layers, d, f, hq, hkv, head_dim;
  int64_t block_size, num_blocks, max_blocks;
  int64_t splits;  // attention work items per kv head (hkv * splits <= blocks)
  int64_t blocks;
  // Null, or [barriers + 1][blocks][2] u64: each block's thread 0 writes %globaltimer (ns) when
  // it arrives at barrier k and when it leaves it (k = barriers: the kernel's start and end),
  // for INFERA_CUDA_DECODE_STACK_TRACE; barriers = 5 * layers - 1.
  uint64_t* trace;
  // > 0: every weight row of the block streams through a ring of this many bytes of shared memory
  // (a multiple of 128, >= decode_stack_ring_min_bytes), copied (TMA) by one thread as far ahead
  // as the ring has room; 0: into registers before the barrier ahead of their phase.
  int64_t ring_bytes;
  // 1 (registers path only): at each layer's start every warp requests into L2 the rows it will
  // load into registers later in the layer (o, gate/up, down) and the next layer's q/k/v rows, so
  // HBM streams them during the norms, the attention and the barriers and each phase's loads hit
  // L2 (DecodeStackArgs of CudaOptions::decode_stack_l2).
  int64_t l2_prefetch;
  double eps, scale;
};

// What one instantiation holds in registers: widths in 16-byte chunks of 8 bf16 per lane
// (hidden <= 1024, hq * head_dim <= 2048, f <= 3072), q/k/v rows <= 2 per warp of the grid,
// f <= 2 gate/up pairs per warp, hidden <= 1 row per warp, a GQA group <= 4, head_dim one of 16,
// 32, 64, 128; all widths multiples of 8.
struct DecodeStackLimits {
  int64_t threads, max_hidden, max_q_width, max_f, max_group;
};
DecodeStackLimits decode_stack_limits();
// Dynamic shared memory of a launch with these shapes (ring included).
int64_t decode_stack_smem_bytes(const DecodeStackArgs& a);
// The smallest ring that holds any one phase's stages of a's shapes and grid (a.blocks).
int64_t decode_stack_ring_min_bytes(const DecodeStackArgs& a);
// Blocks of the kernel for a's head_dim, GQA group and ring (or none) that fit on the device at
// once with `smem` bytes (0: none or an unsupported head_dim); also allows the kernel that much
// dynamic shared memory.
int64_t decode_stack_max_blocks(const DecodeStackArgs& a, int64_t smem);
void launch_decode_stack(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
