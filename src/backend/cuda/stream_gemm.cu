// Backend entry of the weight-streaming GEMM: stream_gemm.cuh's kernels and host side compiled
// once, behind the small interface in stream_gemm.h.
#include <stdexcept>
#include <string>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/stream_gemm.h"
#include "backend/cuda/stream_gemm_launch.cuh"

namespace infera::cuda {

static_assert(kStreamGluSilu == sgemm::kGluSilu && kStreamGluGelu == sgemm::kGluGelu);

namespace {
sgemm::StreamGemmProblem problem_of(const StreamGemmArgs& a) {
  sgemm::StreamGemmProblem q{};
  q.segments = static_cast<int>(a.segments);
  for (int i = 0; i < 3 && i < q.segments; ++i) {
    q.w[i] = static_cast<const __nv_bfloat16*>(a.w[i]);
    q.out[i] = a.out[i];
    q.m[i] = a.m[i];
    q.ldo[i] = a.m[i];
  }
  q.x = static_cast<const __nv_bfloat16*>(a.x);
  q.n = a.n;
  q.k = a.k;
  q.ldx = a.k;
  q.glu = static_cast<int>(a.glu);
  q.out_bf16 = static_cast<__nv_bfloat16*>(a.out_bf16);
  return q;
}
}  // namespace

const char* stream_gemm_unsupported(const StreamGemmArgs& a, int cc_major, int cc_minor) {
  if (cc_major != 9 || cc_minor != 0) return "wgmma needs compute capability 9.0 (sm_90a)";
  return sgemm::stream_gemm_unsupported(problem_of(a));
}

void launch_stream_gemm(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const StreamGemmArgs*>(p);
  const cudaError_t err = sgemm::launch_stream_gemm(problem_of(a), static_cast<int>(a.sm_count), 0,
                                                    programmatic_launch(), s);
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("stream_gemm: ") + cudaGetErrorString(err));
}

}  // namespace infera::cuda
