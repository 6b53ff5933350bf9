// The weight-streaming tensor-core GEMM (stream_gemm.cuh) as the backend records it:
// out[i][n, m[i]] = x[n, k] . w[i][m[i], k]^T for up to three weights sharing x in one launch, or
// with glu gate/up and out[0] = silu(x . w[0]^T) * (x . w[1]^T) (kStreamGluGelu: gelu(...) *
// (...)) (out[1] untouched; out_bf16, when set, gets out[0] as bf16, and out[0] may then be
// null). bf16 w and x, f32 out, n = 1..256 (glu: 1..128). Kept out of kernels.h so that adding it
// does not recompile every kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace infera::cuda {

constexpr int64_t kStreamGluSilu = 1,
                  kStreamGluGelu = 2;  // StreamGemmArgs::glu (stream_gemm.cuh's)

struct StreamGemmArgs {
  const void* w[3];  // bf16 [m[i], k]
  float* out[3];     // f32 [n, m[i]]
  int64_t m[3];
  int64_t segments;
  const void* x;  // bf16 [n, k], row stride k
  int64_t n, k;
  int64_t glu;     // 0, kStreamGluSilu (SwiGLU over segments 0 (gate) and 1 (up)) or kStreamGluGelu
  void* out_bf16;  // glu: bf16 [n, m[0]] copy of out[0], or nullptr
  int64_t sm_count;
};

// nullptr when the kernel takes these arguments (n 1..256, k % 8 == 0, 16-byte aligned w and x,
// a compute capability 9.0 device), else why not.
const char* stream_gemm_unsupported(const StreamGemmArgs& a, int cc_major, int cc_minor);
void launch_stream_gemm(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
