// The batch-1 decode chain's fused ops (ops/backend.h: rmsnorm_matmul_multi, output_mlp) on the
// CUDA backend. For one decode row with bf16 weights the composition runs, per layer, the q/k/v
// GEMV, (qk-norm, attention,) the o GEMV, add_rmsnorm, the gate/up GEMV, the down GEMV and
// add_rmsnorm: at batch 1 each kernel is a ~3 us link of a chain of dependent launches, and the
// two add_rmsnorm kernels do almost no work. Here the residual adds move into the epilogues of
// the o and down GEMVs (each output row belongs to one warp) and each norm into the prologue of
// the GEMV that reads it (every warp recomputes the 4 KB row's norm from L2, in the norm kernel's
// summation order): 6 launches a layer. Anything else, or CudaOptions::b1_fused_chain off: the
// composition, whose one-op kernels compute the same bits.
#include <cstdint>
#include <optional>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/op_checks.h"
#include "infera/error.h"

namespace infera::cuda {
namespace {

bool on_device_f32(const Tensor& t) {
  return !t.empty() && t.device() == Device::CUDA && t.dtype() == DType::F32;
}
bool on_device_bf16(const Tensor& t) {
  return !t.empty() && t.device() == Device::CUDA && t.dtype() == DType::BF16;
}

}  // namespace

bool CudaBackend::b1_chain_on() const {
  // The composition's matmuls of one row must be the plain GEMV (not the stream GEMM, which
  // rounds x to bf16), and its norms the fused one-block kernels.
  return options_.b1_fused_chain && options_.fused && !options_.residual_mlp &&
         options_.gemv_max_rows >= 1 && !stream_gemm_rows(1);
}

GemvArgs CudaBackend::chain_gemv(const Tensor& x, std::span<const Tensor* const> ws,
                                 std::span<Tensor* const> outs, const char* op) const {
  GemvArgs a{};  // segments stays 0 where the fused GEMV does not apply
  if (!on_device_f32(x) || row_count(x) != 1 || ws.empty() || ws.size() != outs.size() ||
      ws.size() > static_cast<size_t>(kGemvMaxSegments))
    return a;
  const int64_t k = row_width(x);
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor& w = *ws[i];
    const Tensor& out = *outs[i];
    if (!on_device_bf16(w) || w.rank() != 2 || w.dim(1) != k || !on_device_f32(out) ||
        row_width(out) != w.dim(0) || row_count(out) != 1 || out.data() == x.data())
      return GemvArgs{};
    a.w[i] = w.data();
    a.out[i] = outs[i]->data_as<float>();
    a.m[i] = w.dim(0);
  }
  a.x = x.data_as<const float>();
  a.segments = static_cast<int64_t>(ws.size());
  a.weight_type = ElemType::BF16;
  a.n = 1;
  a.k = k;
  a.tune = decode_tune();
  return a;
}

void CudaBackend::rmsnorm_matmul_multi(const Tensor& x, const Tensor& norm, float eps, Tensor& xn,
                                       std::span<const Tensor* const> ws,
                                       std::span<Tensor* const> outs) {
  const char* op = "rmsnorm_matmul_multi";
  GemvArgs a{};
  if (b1_chain_on() && on_device_bf16(norm) && norm.numel() == row_width(x) && on_device_f32(xn) &&
      xn.numel() == x.numel() && xn.data() != x.data()) {
    a = chain_gemv(x, ws, outs, op);
    for (Tensor* out : outs)
      if (out->data() == xn.data()) a.segments = 0;
  }
  a.norm = norm.data();
  a.norm_out = xn.data_as<float>();
  a.eps = eps;
  if (a.segments == 0 || !gemv_fusion_applies(a))
    return Backend::rmsnorm_matmul_multi(x, norm, eps, xn, ws, outs);
  ctx_->record(launch_gemv_multi, a, note(op, "gemv_norm", {&x, ws[0], outs[0]}));
  ++fused_gemvs_;
}

void CudaBackend::output_mlp(const Tensor& attn, const Tensor& w_o, Tensor& x,
                             const Tensor& mlp_norm, const Tensor& w_gate, const Tensor& w_up,
                             const Tensor& w_down, const Tensor& next_norm,
                             std::span<const Tensor* const> next_ws,
                             std::span<Tensor* const> next_outs, float eps, Tensor& xn,
                             Tensor& gate, Tensor& up, Tensor& proj) {
  const char* op = "output_mlp";
  auto composed = [&] {
    Backend::output_mlp(attn, w_o, x, mlp_norm, w_gate, w_up, w_down, next_norm, next_ws, next_outs,
                        eps, xn, gate, up, proj);
  };
  const bool last = next_norm.empty();
  if (!b1_chain_on() || (last && !next_ws.empty()) || !on_device_f32(x) || row_count(x) != 1 ||
      !on_device_f32(xn) || xn.numel() != x.numel() || xn.data() == x.data() ||
      !on_device_bf16(mlp_norm) || mlp_norm.numel() != row_width(x) ||
      (!last && (!on_device_bf16(next_norm) || next_norm.numel() != row_width(x))) ||
      attn.data() == x.data() || gate.data() == x.data() || gate.data() == xn.data())
    return composed();
  for (const Tensor* out : next_outs)
    if (out->data() == x.data() || out->data() == xn.data() || out->data() == attn.data())
      return composed();
  // x += attn . w_o^T (o projection + the residual add).
  const Tensor* o_w[] = {&w_o};
  Tensor* o_out[] = {&x};
  GemvArgs o = chain_gemv(attn, o_w, o_out, op);
  o.residual = 1;
  // gate = silu(xn . w_gate^T) * (xn . w_up^T), xn = rmsnorm(x, mlp_norm) in the prologue; the
  // last layer keeps that xn (residual_mlp's contract), so its first warp writes it.
  const Tensor* gu_w[] = {&w_gate, &w_up};
  Tensor* gu_out[] = {&gate, &up};
  GemvArgs gu = chain_gemv(x, gu_w, gu_out, op);
  gu.swiglu = 1;
  gu.norm = mlp_norm.data();
  gu.norm_out = last ? xn.data_as<float>() : nullptr;
  gu.eps = eps;
  if (w_up.shape() != w_gate.shape()) gu.segments = 0;
  // x += gate . w_down^T (down projection + the residual add).
  const Tensor* d_w[] = {&w_down};
  Tensor* d_out[] = {&x};
  GemvArgs dn = chain_gemv(gate, d_w, d_out, op);
  dn.residual = 1;
  // The next layer's q/k/v with xn = rmsnorm(x, next_norm) in the prologue (written out too).
  GemvArgs nx{};
  if (!next_ws.empty()) {
    nx = chain_gemv(x, next_ws, next_outs, op);
    nx.norm = next_norm.data();
    nx.norm_out = xn.data_as<float>();
    nx.eps = eps;
  }
  const bool next_ok = next_ws.empty() || (nx.segments > 0 && gemv_fusion_applies(nx));
  if (o.segments == 0 || gu.segments == 0 || dn.segments == 0 || !gemv_fusion_applies(o) ||
      !gemv_fusion_applies(gu) || !gemv_fusion_applies(dn) || !next_ok || o.m[0] != row_width(x) ||
      dn.m[0] != row_width(x))
    return composed();
  ctx_->record(launch_gemv_multi, o, note(op, "gemv_residual", {&attn, &w_o, &x}));
  ctx_->record(launch_gemv_multi, gu, note(op, "gemv_norm_swiglu", {&x, &w_gate, &gate}));
  ctx_->record(launch_gemv_multi, dn, note(op, "gemv_residual", {&gate, &w_down, &x}));
  fused_gemvs_ += 3;
  if (!next_ws.empty()) {
    ctx_->record(launch_gemv_multi, nx, note(op, "gemv_norm", {&x, next_ws[0], next_outs[0]}));
    ++fused_gemvs_;
  } else if (!last) {
    rmsnorm(x, next_norm, eps, xn);  // a next norm without projections: the norm kernel
  }
}

}  // namespace infera::cuda
