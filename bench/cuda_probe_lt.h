// The cuBLASLt side of the standalone GEMM probes (cuda_gemm_probe, cuda_decode_gemm_probe): the
// backend's GEMM as a cuBLASLt problem and the heuristic's algorithms for it.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <vector>

#include "cuda_probe_check.h"

namespace probe {

// out^T (m x n, column-major) = W (k x m column-major, i.e. row-major [m, k])^T . x^T (k x n):
// bf16 W and x, f32 compute, out_type output, as the backend's GEMMs; `algos` holds the first
// `most` algorithms the heuristic offers for it with `workspace` bytes of workspace.
struct LtProblem {
  cublasLtMatmulDesc_t op{};
  cublasLtMatrixLayout_t a{}, b{}, c{};
  std::vector<cublasLtMatmulHeuristicResult_t> algos;

  LtProblem(cublasLtHandle_t lt, int n, int k, int m, cudaDataType_t out_type, size_t workspace,
            int most) {
    CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    CB(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, m, k));
    CB(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, n, k));
    CB(cublasLtMatrixLayoutCreate(&c, out_type, m, n, m));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &workspace, sizeof(workspace)));
    algos.resize(static_cast<size_t>(most));
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, c, c, pref, most, algos.data(), &found));
    algos.resize(static_cast<size_t>(found));
    cublasLtMatmulPreferenceDestroy(pref);
  }
  ~LtProblem() {
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
  }
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;
};

}  // namespace probe
