// Checked CUDA and cuBLAS calls: every failure becomes an infera::Error that names the operation
// (and, for ops, the shapes) and the CUDA error, never an abort.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "infera/error.h"

namespace infera::cuda {

// Adds a hint for errors that surface after the op that caused them.
inline std::string cuda_error_text(cudaError_t err) {
  std::string s = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure ||
      err == cudaErrorMisalignedAddress || err == cudaErrorIllegalInstruction)
    s += " (the GPU context is now unusable; INFERA_CUDA_SYNC=1 names the op that faulted)";
  return s;
}

inline void check_cuda(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw Error("[cuda] " + what + ": " + cuda_error_text(err));
}

inline void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("[cuda] " + what + ": cuBLAS error " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ")");
}

}  // namespace infera::cuda
