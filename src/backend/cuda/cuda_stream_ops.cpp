// Decode-batch matmuls through the weight-streaming GEMM (stream_gemm.cuh): the dispatch that
// matmul, matmul_multi and matmul_swiglu try first when CudaOptions::stream_gemm is on.
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "backend/cuda/stream_gemm.h"
#include "infera/error.h"

namespace infera::cuda {

bool CudaBackend::record_stream(const Tensor& x, std::span<const Tensor* const> ws,
                                std::span<Tensor* const> outs, const char* op) {
  if (!options_.stream_gemm || options_.exact_f32 || ws.empty() || ws.size() != outs.size())
    return false;
  const int64_t n = row_count(x), k = row_width(x);
  const int64_t lo =
      options_.stream_gemm_min_rows > 0 ? options_.stream_gemm_min_rows : options_.gemv_max_rows + 1;
  if (n < lo || n > options_.stream_gemm_max_rows) return false;
  const cudaDeviceProp& props = ctx_->properties();
  std::vector<StreamGemmArgs> args(ws.size());
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor& w = *ws[i];
    if (w.dtype() != DType::BF16 || w.device() != Device::CUDA) return false;
    matmul_checks(x, w, *outs[i]);
    // x stands in for its bf16 copy here (scratch or shadow, both 256-byte aligned).
    args[i] = StreamGemmArgs{w.data(), w.data(), outs[i]->data_as<float>(), n, w.dim(0), k,
                             props.multiProcessorCount};
    if (stream_gemm_unsupported(args[i], props.major, props.minor)) return false;
  }
  OpNote nt = note(op, "stream_gemm", {&x, ws[0], outs[0]});
  const void* xb = take_shadow(x, n * k);
  if (!xb) {
    void* buf = ctx_->scratch(DeviceContext::kGemmInputBf16, static_cast<size_t>(n * k) * 2);
    OpNote cn = nt;
    cn.kernel = "convert_bf16";
    ctx_->record(launch_convert, ConvertArgs{x.data_as<const float>(), buf, ElemType::BF16, n * k},
                 cn);
    xb = buf;
  }
  for (size_t i = 0; i < ws.size(); ++i) {
    args[i].x = xb;
    if (i > 0) nt = note(op, "stream_gemm", {&x, ws[i], outs[i]});
    ctx_->record(launch_stream_gemm, args[i], nt);
  }
  return true;
}

}  // namespace infera::cuda
