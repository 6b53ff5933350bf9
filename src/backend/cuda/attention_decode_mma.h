// The tensor-core decode attention (attention_decode_mma.cu): the staged kernel's work
// (kernels.h, attention_decode_staged_supports) with S = Q K^T and O += P V on mma.sync, q and P
// rounded to the cache type, f32 softmax and accumulation; 32-key tiles streamed per warp
// through shared memory (bf16/f16 caches, head_dim 64 or 128, <= 8 query vectors per
// (sequence, kv head)). Grid (1, sequences, kv heads x splits), as the staged kernel's.
// AttentionArgs::stages carries its (warps, stages) shape, CudaOptions::decode_mma_config
// (0 = the default), instead of the staged kernel's stage count.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace infera::cuda {

bool attention_decode_mma_supports(ElemType type, int64_t head_dim);
int attention_decode_mma_blocks_per_sm(int64_t head_dim, int64_t config);
void launch_attention_decode_mma(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
