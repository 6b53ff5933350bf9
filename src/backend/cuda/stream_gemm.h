// The weight-streaming tensor-core GEMM (stream_gemm.cuh) as the backend records it: one
// out[n, m] = x[n, k] . w[m, k]^T per launch, bf16 w and x, f32 out, n = 1..256. Kept out of
// kernels.h so that adding it does not recompile every kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace infera::cuda {

struct StreamGemmArgs {
  const void* w;  // bf16 [m, k]
  const void* x;  // bf16 [n, k], row stride k
  float* out;     // f32 [n, m]
  int64_t n, m, k;
  int64_t sm_count;
};

// nullptr when the kernel takes these arguments (n 1..256, k % 8 == 0, 16-byte aligned w and x,
// a compute capability 9.0 device), else why not.
const char* stream_gemm_unsupported(const StreamGemmArgs& a, int cc_major, int cc_minor);
void launch_stream_gemm(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
