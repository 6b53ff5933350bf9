// The q/k/v GEMM with the head epilogue (qkv_gemm.cu) as the backend records it: the decoder
// stack's one q/k/v product and the qk-norm / RoPE / KV-cache write after it in one launch. Kept
// out of kernels.h so that adding it does not recompile every kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/tma_gemm.h"

namespace infera::cuda {

struct QkvGemmArgs {
  const void* x;  // bf16 [n, k] (the normed hidden states)
  const void* w;  // bf16 [(hq + 2 hkv) head_dim, k]: q's, k's and v's rows one after another
  int64_t k;
  // The op's arguments as qk_norm_rope_kv_write takes them (n, heads, head_dim 128, norms,
  // positions, RoPE tables, slots, the bf16 pools), with q16_out and q16_scale set: each q head
  // normed, rotated and times q16_scale as bf16 [n, hq, 128] (the wgmma prefill attention's
  // queries), each k head normed and rotated into the key pool, v into the value pool.
  QkNormRopeKvArgs qa;
  TmaGemmSchedule schedule;  // (tile_cols: one head, 128)
};

// nullptr when the kernel takes these arguments (compute capability 9.0, head_dim 128, a bf16
// cache, bf16 queries out, k a multiple of 8, 16-byte aligned x and w), else why not.
const char* qkv_gemm_unsupported(const QkvGemmArgs& a, int cc_major, int cc_minor);
void launch_qkv_gemm(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
