// The GLU GEMM (glu_gemm.cu) as the backend records it: out = act(x . w0^T) * (x . w1^T) in one
// launch, SwiGLU's silu(gate) * up or GeGLU's gelu(input) * gate, from bf16 x and weights with f32
// accumulation, written as bf16 and / or f32. Kept out of kernels.h so that adding it does not
// recompile every kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/tma_gemm.h"

namespace infera::cuda {

constexpr int64_t kGluGemmSilu = 1, kGluGemmGelu = 2;  // GluGemmArgs::act

struct GluGemmArgs {
  const void* x;   // bf16 [m, k], row stride ldx elements
  const void* w0;  // bf16 [f, k]: act's operand (SwiGLU's gate, GeGLU's input half)
  const void* w1;  // bf16 [f, k]
  void* out_bf16;  // bf16 [m, f], or nullptr
  float* out_f32;  // f32 [m, f], or nullptr (not both)
  int64_t m, k, f, ldx;
  int64_t act;               // kGluGemmSilu or kGluGemmGelu
  TmaGemmSchedule schedule;  // tile_cols 64 or 128 (ping-pong: 64)
};

// nullptr when the kernel takes these arguments (a compute capability 9.0 device, k and ldx
// multiples of 8, 16-byte aligned x and weights, an output), else why not.
const char* glu_gemm_unsupported(const GluGemmArgs& a, int cc_major, int cc_minor);
void launch_glu_gemm(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
