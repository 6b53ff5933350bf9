// The fused ops' defaults (ops/backend.h): each is the composition it is defined as, so a backend
// that does not override one stays correct, and the op harness checks an override against the
// same scalar reference as the default.
#include <string>
#include <vector>

#include "core/float_scan.h"
#include "infera/error.h"
#include "ops/backend.h"

namespace infera {

void Backend::add_rmsnorm(Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                          Tensor& out) {
  if (out.data() == x.data() || out.data() == delta.data())
    throw InvalidArgument("[add_rmsnorm] out must not alias x or delta");
  add(x, delta, x);
  rmsnorm(x, weight, eps, out);
}

void Backend::matmul_multi(const Tensor& x, std::span<const Tensor* const> ws,
                           std::span<Tensor* const> outs) {
  if (ws.size() != outs.size())
    throw InvalidArgument("[matmul] " + std::to_string(ws.size()) + " weights for " +
                          std::to_string(outs.size()) + " outputs");
  for (size_t i = 0; i < ws.size(); ++i) matmul(x, *ws[i], *outs[i]);
}

void Backend::matmul_swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate,
                            Tensor& up) {
  matmul(x, w_gate, gate);
  matmul(x, w_up, up);
  swiglu(gate, up, gate);
}

void Backend::matmul_swiglu_down(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                                 const Tensor& w_down, Tensor& gate, Tensor& up, Tensor& out) {
  matmul_swiglu(x, w_gate, w_up, gate, up);
  matmul(gate, w_down, out);
}

void Backend::qk_norm_rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm,
                                    const Tensor& k_norm, float eps, double theta, KvLayer& cache,
                                    const Batch& batch) {
  rmsnorm(q, q_norm, eps, q);
  rmsnorm(k, k_norm, eps, k);
  rope(q, batch.positions, theta);
  rope(k, batch.positions, theta);
  kv_write(k, v, cache, batch);
}

void Backend::residual_mlp(Tensor& x, const Tensor& delta, const Tensor& mlp_norm,
                           const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                           const Tensor& next_norm, float eps, Tensor& xn, Tensor& gate, Tensor& up,
                           Tensor& proj) {
  add_rmsnorm(x, delta, mlp_norm, eps, xn);
  matmul_swiglu_down(xn, w_gate, w_up, w_down, gate, up, proj);
  if (!next_norm.empty())
    add_rmsnorm(x, proj, next_norm, eps, xn);
  else
    add(x, proj, x);
}

void Backend::rmsnorm_matmul_multi(const Tensor& x, const Tensor& norm, float eps, Tensor& xn,
                                   std::span<const Tensor* const> ws,
                                   std::span<Tensor* const> outs) {
  rmsnorm(x, norm, eps, xn);
  matmul_multi(xn, ws, outs);
}

void Backend::output_mlp(const Tensor& attn, const Tensor& w_o, Tensor& x, const Tensor& mlp_norm,
                         const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                         const Tensor& next_norm, std::span<const Tensor* const> next_ws,
                         std::span<Tensor* const> next_outs, float eps, Tensor& xn, Tensor& gate,
                         Tensor& up, Tensor& proj) {
  if (next_norm.empty() && !next_ws.empty())
    throw InvalidArgument("[output_mlp] next-layer projections without a next norm");
  matmul(attn, w_o, proj);
  residual_mlp(x, proj, mlp_norm, w_gate, w_up, w_down, next_norm, eps, xn, gate, up, proj);
  if (!next_ws.empty()) matmul_multi(xn, next_ws, next_outs);
}

void Backend::decoder_stack(Tensor& x, std::span<const DecoderLayerRefs> layers,
                            const Batch& batch, const DecoderStackParams& p,
                            const DecoderStackScratch& s) {
  const int64_t n = x.rank() == 2 ? x.dim(0) : 0;
  if (n == 0 || !s.xn || !s.q || !s.k || !s.v || !s.attn || !s.proj || !s.gate || !s.up)
    throw InvalidArgument("[decoder_stack] x " + x.shape().str() +
                          " must be [n, hidden] with every scratch tensor given");
  Tensor* qkv[] = {s.q, s.k, s.v};
  for (size_t il = 0; il < layers.size(); ++il) {
    const DecoderLayerRefs& w = layers[il];
    if (!w.cache) throw InvalidArgument("[decoder_stack] layer " + std::to_string(il) + " has no cache");
    const Tensor* qkv_w[] = {w.q_proj, w.k_proj, w.v_proj};
    if (il == 0) rmsnorm_matmul_multi(x, *w.attn_norm, p.eps, *s.xn, qkv_w, qkv);
    Tensor qh = s.q->reshaped({n, p.q_heads, p.head_dim});
    Tensor kh = s.k->reshaped({n, p.kv_heads, p.head_dim});
    qk_norm_rope_kv_write(qh, kh, s.v->reshaped({n, p.kv_heads, p.head_dim}), *w.q_norm,
                          *w.k_norm, p.eps, p.rope_theta, *w.cache, batch);
    Tensor attn_h = s.attn->reshaped({n, p.q_heads, p.head_dim});
    attention(qh, *w.cache, batch, {.scale = p.scale, .causal = true}, attn_h);
    const DecoderLayerRefs* next = il + 1 < layers.size() ? &layers[il + 1] : nullptr;
    const Tensor no_norm;
    const Tensor* next_w[] = {next ? next->q_proj : nullptr, next ? next->k_proj : nullptr,
                              next ? next->v_proj : nullptr};
    const std::span<const Tensor* const> next_ws(next_w, next ? 3 : 0);
    const std::span<Tensor* const> next_outs(qkv, next ? 3 : 0);
    output_mlp(*s.attn, *w.o_proj, x, *w.mlp_norm, *w.gate_proj, *w.up_proj, *w.down_proj,
               next ? *next->attn_norm : no_norm, next_ws, next_outs, p.eps, *s.xn, *s.gate,
               *s.up, *s.proj);
  }
}

void Backend::argmax_rows(const Tensor& x, std::span<int32_t> ids) {
  if (x.rank() != 2 || x.dtype() != DType::F32 || static_cast<int64_t>(ids.size()) != x.dim(0))
    throw InvalidArgument("[argmax_rows] x " + x.shape().str() +
                          " must be F32 [rows, width] with " + std::to_string(ids.size()) +
                          " rows");
  const int64_t rows = x.dim(0), width = x.dim(1);
  std::vector<float> host(static_cast<size_t>(x.numel()));
  to_host(x, host);
  // The first of equal maxima, NaN skipped, -1 where none is above -inf (as the CPU backend's).
  for (int64_t r = 0; r < rows; ++r)
    ids[static_cast<size_t>(r)] =
        static_cast<int32_t>(first_argmax_f32(host.data() + r * width, width));
}

void Backend::sample_rows(const Tensor&, std::span<const RowSampling>, std::span<SampledId>) {
  unsupported(Op::SampleRows);  // the host samples with sample/sampler.h
}

}  // namespace infera
