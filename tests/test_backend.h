// The backend that device-parameterised tests (tests/model, tests/engine) run on, chosen by
// $INFERA_TEST_DEVICE:
//   cpu (default)  the CPU backend, the reference;
//   cuda           the CUDA backend as it runs models: bf16 tensor cores (activations rounded to
//                  bf16) for matmuls of more than 8 rows and for prefill attention;
//   cuda-exact     the CUDA backend with every product in f32 on CUDA cores;
//   cpu-bf16       the CPU backend with --matmul-precision bf16 (AVX512-BF16 dot products on
//                  activations rounded to bf16), where the CPU has those instructions.
// scripts/test.sh gpu runs those suites once per CUDA mode.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_bf16_dot.h"
#ifdef INFERA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace infera::test {

inline std::string test_device() {
  const char* env = std::getenv("INFERA_TEST_DEVICE");
  return env && *env ? env : "cpu";
}

// The backend for test_device(), or nullptr with *why set when it cannot run here (the caller
// skips, saying why).
inline std::unique_ptr<Backend> make_test_backend(int threads, std::string* why) {
  const std::string d = test_device();
  if (d == "cpu") return make_cpu_backend(threads);
  if (d == "cpu-bf16") {
    if (!cpu::has_bf16_dot()) {
      *why = "INFERA_TEST_DEVICE=cpu-bf16 but this CPU has no AVX512-BF16: not tested here";
      return nullptr;
    }
    return make_cpu_backend(threads, PackedAttentionSchedule::Windowed, MatmulPrecision::BF16);
  }
  if (d != "cuda" && d != "cuda-exact") {
    *why = "INFERA_TEST_DEVICE=" + d + ": expected cpu, cpu-bf16, cuda or cuda-exact";
    return nullptr;
  }
#ifdef INFERA_WITH_CUDA
  if (cuda_device_count() == 0) {
    *why = "INFERA_TEST_DEVICE=" + d + " but no CUDA device is visible: not tested here";
    return nullptr;
  }
  CudaOptions options = cuda_options_from_env();
  options.exact_f32 = d == "cuda-exact";
  return make_cuda_backend(0, options);
#else
  *why = "INFERA_TEST_DEVICE=" + d + " but this build has no CUDA backend: not tested here";
  return nullptr;
#endif
}

// The bound for a logit comparison whose CPU bound is `cpu`, for logits whose largest magnitude
// is `scale`. On the GPU in f32 (cuda-exact) only summation order differs: 1e-3, the fixtures'
// README bound for f32 compute. The tensor-core path (cuda) rounds GEMM and attention operands to
// bf16 (8 significant bits), which moves logits in proportion to their size: measured at up to
// 6e-3 of the largest |logit| on these fixtures, bound 1e-2 of it; the CPU's bf16 matmuls
// (cpu-bf16) round the same operands and get the same bound. Any indexing, masking or rope error
// moves them by a large fraction of it.
inline double logit_tolerance(double cpu, double scale) {
  const std::string d = test_device();
  if (d == "cuda-exact") return std::max(cpu, 1e-3);
  if (d == "cuda" || d == "cpu-bf16") return std::max(cpu, 1e-2 * scale);
  return cpu;
}

// The largest |v|, the `scale` of logit_tolerance.
inline double max_abs(std::span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

}  // namespace infera::test
