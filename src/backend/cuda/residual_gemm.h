// The residual GEMM (residual_gemm.cu) as the backend records it: out += x . w^T with bf16 x and
// w, f32 out (the decoder and encoder stacks' o / down / Wo projections adding into the residual
// stream, as cuBLAS's beta-1 GEMM does). Kept out of kernels.h so that adding it does not
// recompile every kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/tma_gemm.h"

namespace infera::cuda {

struct ResidualGemmArgs {
  const void* x;  // bf16 [m, k], row stride k
  const void* w;  // bf16 [n, k]
  float* out;     // f32 [m, n], added into
  int64_t m, k, n;
  TmaGemmSchedule schedule;  // tile_cols 128 or 256 (ping-pong: 128)
};

// nullptr when the kernel takes these arguments (a compute capability 9.0 device, k a multiple
// of 8, n even, 16-byte aligned x and w, 8-byte aligned out), else why not.
const char* residual_gemm_unsupported(const ResidualGemmArgs& a, int cc_major, int cc_minor);
void launch_residual_gemm(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
