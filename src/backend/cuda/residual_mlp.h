// The launch record of the residual-MLP kernel (residual_mlp.cu), in its own header so that the
// other kernel files do not depend on it. Conventions as kernels.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace infera::cuda {

// Backend::residual_mlp of one row with bf16 weights as one kernel (residual_mlp.cu):
// x += delta; xn = rmsnorm(x) * mlp_norm; h = silu(xn . Wg^T) * (xn . Wu^T); x += h . Wd^T;
// xn = rmsnorm(x) * next_norm (next_norm null: xn keeps the MLP norm's output). Grid `blocks`
// (all co-resident), block b owning gate/up outputs [b * gate_rows, ...) and down rows
// [b * down_rows, ...); d, f multiples of 8, weights 16-byte aligned; sync: 2 zeroed counters,
// left zero. mlp_norm and next_norm of norm_type.
struct ResidualMlpArgs {
  float* x;
  const float* delta;
  const void* mlp_norm;
  const void* w_gate;
  const void* w_up;
  const void* w_down;
  const void* next_norm;
  float* xn;
  float* h;  // [f] scratch
  unsigned* sync;
  int64_t d, f, blocks, gate_rows, down_rows;
  int64_t chunk;    // bytes per bulk copy (0: one copy per weight slice)
  int64_t lsu;      // 1: cp.async by every thread instead of bulk copies (TMA)
  int64_t threads;  // per block: 256 or 512
  ElemType norm_type;
  double eps;
};
int64_t residual_mlp_smem_bytes(int64_t d, int64_t f, int64_t gate_rows, int64_t down_rows);
// Blocks of the kernel with this much dynamic shared memory that fit on the device at once (0:
// none); also allows the kernel the device's shared memory limit and the largest carveout.
int64_t residual_mlp_max_blocks(int64_t smem_bytes, int64_t threads, ElemType norm_type);
void launch_residual_mlp(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
