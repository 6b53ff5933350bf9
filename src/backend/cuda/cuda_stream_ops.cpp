// Decode-batch matmuls through the weight-streaming GEMM (stream_gemm.cuh): the dispatch that
// matmul, matmul_multi and matmul_swiglu try first when CudaOptions::stream_gemm is on.
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "backend/cuda/stream_gemm.h"
#include "infera/error.h"

namespace infera::cuda {

bool CudaBackend::record_stream(const Tensor& x, std::span<const Tensor* const> ws,
                                std::span<Tensor* const> outs, bool glu, const char* op) {
  if (!options_.stream_gemm || options_.exact_f32 || ws.empty() || ws.size() != outs.size() ||
      ws.size() > 3 || (glu && ws.size() != 2))
    return false;
  const int64_t n = row_count(x), k = row_width(x);
  if (!stream_gemm_rows(n)) return false;
  const cudaDeviceProp& props = ctx_->properties();
  StreamGemmArgs a{};
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor& w = *ws[i];
    if (w.dtype() != DType::BF16 || w.device() != Device::CUDA) return false;
    matmul_checks(x, w, *outs[i]);
    a.w[i] = w.data();
    a.out[i] = outs[i]->data_as<float>();
    a.m[i] = w.dim(0);
  }
  a.segments = static_cast<int64_t>(ws.size());
  a.n = n;
  a.k = k;
  a.glu = glu ? kStreamGluSilu : 0;
  a.sm_count = props.multiProcessorCount;
  a.x = ws[0]->data();  // stands in for x's bf16 copy (scratch or shadow: 256-byte aligned)
  if (stream_gemm_unsupported(a, props.major, props.minor)) return false;

  OpNote nt = note(op, glu ? "stream_swiglu" : "stream_gemm", {&x, ws[0], outs[0]});
  a.x = bf16_input(x, n, k, nullptr, &nt);
  // gate's bf16 copy for the down projection, in a slot of its own: x may be the shadow slot.
  if (glu && options_.bf16_shadow)
    a.out_bf16 = ctx_->scratch(DeviceContext::kSkinnyGluBf16, static_cast<size_t>(n * a.m[0]) * 2);
  ctx_->record(launch_stream_gemm, a, nt);
  if (a.out_bf16) publish_shadow(*outs[0], a.out_bf16);
  return true;
}

bool CudaBackend::record_stream_geglu16(const void* x16, int64_t n, int64_t k, const Tensor& w_in,
                                        const Tensor& w_gate, void* out16, const char* op) {
  for (const Tensor* w : {&w_in, &w_gate})
    if (w->dtype() != DType::BF16 || w->device() != Device::CUDA || w->rank() != 2 ||
        w->dim(1) != k)
      return false;
  const cudaDeviceProp& props = ctx_->properties();
  StreamGemmArgs a{};
  a.w[0] = w_in.data();
  a.w[1] = w_gate.data();
  a.m[0] = w_in.dim(0);
  a.m[1] = w_gate.dim(0);
  a.segments = 2;
  a.x = x16;
  a.n = n;
  a.k = k;
  a.glu = kStreamGluGelu;
  a.out_bf16 = out16;
  a.sm_count = props.multiProcessorCount;
  if (stream_gemm_unsupported(a, props.major, props.minor)) return false;
  ctx_->record(launch_stream_gemm, a, note(op, "stream_geglu16", {&w_in, &w_gate}));
  ++encoder_stream_glu_;
  return true;
}

}  // namespace infera::cuda
