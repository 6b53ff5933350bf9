#include "backend/cuda/gemm_plans.h"

#include "backend/cuda/cuda_check.h"

namespace infera::cuda {
namespace {

constexpr size_t kMaxPlans = 4096;  // distinct prefill lengths x 4 GEMM shapes; then GemmEx

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

void destroy(GemmPlan& p) {
  if (p.w) cublasLtMatrixLayoutDestroy(p.w);
  if (p.x) cublasLtMatrixLayoutDestroy(p.x);
  if (p.out) cublasLtMatrixLayoutDestroy(p.out);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
}

}  // namespace

GemmPlans::GemmPlans(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  check_cublas(cublasLtCreate(&lt_), "create the cuBLASLt handle");
}

GemmPlans::~GemmPlans() {
  for (auto& [key, plan] : plans_)
    if (plan) destroy(*plan);
  if (lt_) cublasLtDestroy(lt_);
}

const GemmPlan* GemmPlans::get(cudaDataType_t type, int64_t n, int64_t k, int64_t m, const void* w,
                               const void* x, const void* out) {
  const Key key{static_cast<int>(type), n, k, m, alignment(w), alignment(x), alignment(out)};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  if (plans_.size() >= kMaxPlans) return nullptr;
  auto& slot = plans_[key];
  slot = make(type, n, k, m, std::get<4>(key), std::get<5>(key), std::get<6>(key));
  return slot.get();
}

// Column-major terms, as cublasGemmEx(OP_T, OP_N, m, n, k, w (ld k), x (ld k), out (ld m)):
// out^T (m x n) = op_T(w: k x m) . x^T (k x n), f32 accumulation, f32 output, no TF32.
std::unique_ptr<GemmPlan> GemmPlans::make(cudaDataType_t type, int64_t n, int64_t k, int64_t m,
                                          uint32_t align_w, uint32_t align_x,
                                          uint32_t align_out) const {
  auto p = std::make_unique<GemmPlan>();
  bool ok =
      cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
  const cublasOperation_t trans_w = CUBLAS_OP_T, trans_x = CUBLAS_OP_N;
  ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_w,
                                            sizeof trans_w) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_x,
                                            sizeof trans_x) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatrixLayoutCreate(&p->w, type, static_cast<uint64_t>(k),
                                        static_cast<uint64_t>(m), k) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatrixLayoutCreate(&p->x, type, static_cast<uint64_t>(k),
                                        static_cast<uint64_t>(n), k) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatrixLayoutCreate(&p->out, CUDA_R_32F, static_cast<uint64_t>(m),
                                        static_cast<uint64_t>(n), m) == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulPreference_t pref = nullptr;
  ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS;
  const uint64_t ws = workspace_bytes_;
  ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws) == CUBLAS_STATUS_SUCCESS;
  // The heuristic must not pick a kernel that assumes more alignment than the operands have.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_out}};
  for (const auto& [attr, value] : aligns)
    ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value) ==
                   CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ok = ok && cublasLtMatmulAlgoGetHeuristic(lt_, p->desc, p->w, p->x, p->out, p->out, pref, 1,
                                            &result, &found) == CUBLAS_STATUS_SUCCESS;
  ok = ok && found > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
       result.workspaceSize <= workspace_bytes_;
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (!ok) {
    destroy(*p);
    return nullptr;
  }
  p->algo = result.algo;
  p->workspace_bytes = result.workspaceSize;
  return p;
}

cublasStatus_t run_gemm_plan(cublasLtHandle_t lt, const GemmPlan& plan, const void* w,
                             const void* x, float* out, void* workspace, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(lt, plan.desc, &alpha, w, plan.w, x, plan.x, &beta, out, plan.out, out,
                        plan.out, &plan.algo, workspace, plan.workspace_bytes, stream);
}

}  // namespace infera::cuda
