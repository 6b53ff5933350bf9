// Decode-batch matmuls through the skinny tensor-core GEMM (skinny_gemm.cu): the dispatch that
// matmul, matmul_multi and matmul_swiglu try before cuBLAS for batches past the GEMV.
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "infera/error.h"

namespace infera::cuda {

bool CudaBackend::record_skinny(const Tensor& x, std::span<const Tensor* const> ws,
                                std::span<Tensor* const> outs, int64_t glu, const char* op) {
  const bool gated = glu != 0;  // either gated unit: two weights, one output
  if (!options_.skinny_gemm || options_.exact_f32 || ws.empty() || ws.size() != outs.size() ||
      ws.size() > static_cast<size_t>(kGemvMaxSegments) || (gated && ws.size() != 2))
    return false;
  const int64_t n = row_count(x), k = row_width(x);
  if (n <= options_.gemv_max_rows || n > options_.skinny_max_rows) return false;
  SkinnyGemmArgs a{};
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor& w = *ws[i];
    if (w.dtype() != DType::BF16) return false;
    matmul_checks(x, w, *outs[i]);
    a.w[i] = w.data();
    a.out[i] = outs[i]->data_as<float>();
    a.m[i] = w.dim(0);
  }
  a.segments = static_cast<int64_t>(ws.size());
  a.glu = glu;
  a.n = n;
  a.k = k;
  a.x = ws[0]->data();  // stands in for x's bf16 copy (scratch or shadow: 256-byte aligned)
  if (!skinny_gemm_supports(a)) return false;

  // x as bf16: the shadow its producer wrote, or one conversion for every weight.
  OpNote nt = note(op,
                   glu == kSkinnyGeglu ? "skinny_geglu"
                   : gated             ? "skinny_swiglu"
                                       : "skinny_gemm",
                   {&x, ws[0], outs[0]});
  a.x = bf16_input(x, n, k, nullptr, &nt);
  // gate's bf16 copy for the down projection, in a slot of its own: x may be the shadow slot.
  if (gated && options_.bf16_shadow)
    a.out_bf16 = ctx_->scratch(DeviceContext::kSkinnyGluBf16, static_cast<size_t>(n * a.m[0]) * 2);
  skinny_gemm_layout(a, ctx_->properties().multiProcessorCount, options_.skinny_ctas_per_sm,
                     options_.skinny_wide_rows);
  ctx_->record(launch_skinny_gemm, a, nt);
  if (a.out_bf16) publish_shadow(*outs[0], a.out_bf16);
  return true;
}

}  // namespace infera::cuda
