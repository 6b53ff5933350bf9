// cuBLASLt plans for the backend's GEMM shape, out[n, m] (f32) = x[n, k] . w[m, k]^T, made once
// per (dtype, shape, operand alignment) and reused by every later launch of that shape.
//
// Why: a prefill step issues ~200 GEMMs, and cublasGemmEx rebuilds its matmul description and
// asks the heuristic for an algorithm on every call. On a step that is launched as it is
// recorded (a never-seen prompt length), that host work sits between the GPU's kernels. A plan
// keeps the descriptors and the algorithm, so a launch is one cublasLtMatmul call.
// Measured on the H200 (cudah run, bench/reference/cudah_h200): ~13 us of host time per GEMM
// launch instead of ~39, but no faster prefill step, so CudaOptions::cublaslt_plans is opt-in.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace infera::cuda {

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
};

class GemmPlans {
 public:
  // `workspace` (device memory of `workspace_bytes`) bounds what an algorithm may use.
  GemmPlans(void* workspace, size_t workspace_bytes);
  ~GemmPlans();
  GemmPlans(const GemmPlans&) = delete;
  GemmPlans& operator=(const GemmPlans&) = delete;

  // The plan for w and x of `type` (CUDA_R_16BF or CUDA_R_32F) at these addresses' alignments;
  // nullptr when cuBLASLt offers no algorithm or the cache is full (the caller then uses
  // cublasGemmEx). Plans live as long as this object: pending launches and graphs name them.
  const GemmPlan* get(cudaDataType_t type, int64_t n, int64_t k, int64_t m, const void* w,
                      const void* x, const void* out);
  cublasLtHandle_t handle() const { return lt_; }
  void* workspace() const { return workspace_; }

 private:
  using Key = std::tuple<int, int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;
  std::unique_ptr<GemmPlan> make(cudaDataType_t type, int64_t n, int64_t k, int64_t m,
                                 uint32_t align_w, uint32_t align_x, uint32_t align_out) const;

  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<GemmPlan>> plans_;  // nullptr: no algorithm for that key
};

// cublasLtMatmul with a plan: out = w^T-ish product as above, on `stream`.
cublasStatus_t run_gemm_plan(cublasLtHandle_t lt, const GemmPlan& plan, const void* w,
                             const void* x, float* out, void* workspace, cudaStream_t stream);

}  // namespace infera::cuda
