#include "backend/registry.h"

#include "backend/cpu/cpu_backend.h"
#include "infera/error.h"

#ifdef INFERA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace infera {

std::vector<std::string> known_devices() {
#ifdef INFERA_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

namespace {
bool dense_packed_attention(const BackendOptions& options) {
  const std::string& s = options.packed_attention;
  if (s != "windowed" && s != "dense")
    throw InvalidArgument("packed attention schedule " + s + ": expected windowed or dense");
  return s == "dense";
}

std::unique_ptr<Backend> make_cpu(const BackendOptions& options) {
  const std::string& p = options.matmul_precision;
  if (p != "f32" && p != "bf16")
    throw InvalidArgument("--matmul-precision " + p + ": expected f32 or bf16");
  return make_cpu_backend(options.threads,
                          dense_packed_attention(options) ? PackedAttentionSchedule::Dense
                                                          : PackedAttentionSchedule::Windowed,
                          p == "bf16" ? MatmulPrecision::BF16 : MatmulPrecision::F32);
}
}  // namespace

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  const std::string& d = options.device;
  if (d == "cpu") return make_cpu(options);
  if (d == "cuda" || d == "auto") {
#ifdef INFERA_WITH_CUDA
    if (cuda_device_count() > 0) {
      CudaOptions o = cuda_options_from_env();
      if (dense_packed_attention(options)) o.packed_dense = true;
      return make_cuda_backend(0, o);
    }
    if (d == "cuda") throw Error("--device cuda: no CUDA device is visible on this machine");
#else
    if (d == "cuda")
      throw Error(
          "--device cuda: this build of infera has no CUDA backend "
          "(configure with -DINFERA_CUDA=ON where nvcc is found)");
#endif
    return make_cpu(options);
  }
  throw InvalidArgument("--device " + d + ": unknown device (expected cpu, cuda or auto)");
}

}  // namespace infera
