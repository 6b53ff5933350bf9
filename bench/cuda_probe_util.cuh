// Shared pieces of the standalone CUDA probes in bench/ (cuda_gemm_probe, cuda_decode_gemm_probe,
// cuda_tma_gemm_probe): seeded bf16 fills, bf16 -> f32 copies and GPU time per launch from a
// replayed CUDA graph.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda_probe_check.h"

namespace probe {

// p[i] = a hash of (i, seed) as a value in [-0.05, 0.05), never all zeros.
__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = __float2bfloat16((static_cast<float>(x & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}

__global__ void bf16_to_f32(const __nv_bfloat16* in, float* out, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

// f(i) launches the i-th run of a product; returns us per launch: `launches` launches captured
// in a CUDA graph (so the host's per-call cost, ~10 us for cublasGemmEx, is not what is timed),
// the graph replayed 7 times, median.
template <typename F>
double graph_time_us(F&& f, cudaStream_t s, int launches) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) f(i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, s));
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / launches);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

}  // namespace probe
