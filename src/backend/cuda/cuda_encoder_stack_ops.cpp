// Backend::encoder_stack on the CUDA backend (ModernBERT; CudaOptions::encoder_stack): the
// composition's GEMMs and attention with bf16 between every producer and the GEMM that reads it.
//
// Why: at 64x512 the encoder's f32 passes between its GEMMs (add_layernorm, the RoPE staging,
// GeGLU's f32 output, the projections written and read back for the residual adds) were about a
// third of the forward (session 9's profile). Here, per layer:
//   [layer 0 without attn_norm: x to bf16] -> q/k/v GEMMs, bf16 out, one strided launch ->
//   RoPE in place on the bf16 q and k (q times the attention's scale) -> flash attention over
//   them, bf16 out only -> o GEMM += x -> LayerNorm, bf16 out only -> Wi GEMMs + GeGLU, bf16 only
//   (short batches: one stream GEMM launch) -> Wo GEMM += x -> the next layer's LayerNorm, bf16
//   out only.
// The f32 values the composition rounds to bf16 for each GEMM are the same here except q, k and v,
// rounded once more (the GEMMs' outputs) before their rotation, as a bf16 model computes them.
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "infera/error.h"

namespace infera::cuda {
void CudaBackend::encoder_stack(Tensor& x, std::span<const EncoderLayerRefs> layers,
                                const Batch& batch, const EncoderStackParams& p,
                                const EncoderStackScratch& s) {
  if (!record_encoder_stack(x, layers, batch, p, s)) Backend::encoder_stack(x, layers, batch, p, s);
}

bool CudaBackend::record_encoder_stack(Tensor& x, std::span<const EncoderLayerRefs> layers,
                                       const Batch& batch, const EncoderStackParams& p,
                                       const EncoderStackScratch& s) {
  const char* op = "encoder_stack";
  if (!options_.encoder_stack || !options_.fused || options_.exact_f32 || options_.skinny_gemm ||
      !options_.layernorm_in_registers || layers.empty() || !batch.desc ||
      x.device() != Device::CUDA || x.dtype() != DType::F32 || x.rank() != 2)
    return false;
  const int64_t n = x.dim(0), d = x.dim(1), hd = p.head_dim;
  if (n <= options_.gemv_max_rows || stream_gemm_rows(n) || p.heads * hd != d || d % 8 != 0 ||
      d > 16384 || !is_aligned16(x.data()))
    return false;
  if (!s.xn || !s.q || !s.k || !s.v || !s.attn || !s.proj || !s.inner || !s.gate) return false;
  for (const Tensor* t : {s.xn, s.q, s.k, s.v, s.attn, s.inner, s.gate})
    if (t->dtype() != DType::F32 || t->device() != Device::CUDA || !is_aligned16(t->data()) ||
        row_count(*t) != n)
      return false;
  for (const Tensor* t : {s.xn, s.q, s.k, s.v, s.attn})
    if (t->numel() != n * d) return false;
  const EncoderLayerRefs& first = layers[0];
  const int64_t f = first.wi_in && first.wi_in->rank() == 2 ? first.wi_in->dim(0) : 0;
  if (f <= 0 || f % 8 != 0 || s.inner->numel() != n * f || s.gate->numel() != n * f) return false;
  for (const EncoderLayerRefs& w : layers) {
    if (!is_bf16_matrix(w.q_proj, d, d) || !is_bf16_matrix(w.k_proj, d, d) ||
        !is_bf16_matrix(w.v_proj, d, d) || !is_bf16_matrix(w.o_proj, d, d) ||
        !is_bf16_matrix(w.wi_in, f, d) || !is_bf16_matrix(w.wi_gate, f, d) ||
        !is_bf16_matrix(w.wo, d, f) || !glu_bf16_applies(*w.wi_in, *w.wi_gate, n))
      return false;
    for (const Tensor* b : {w.q_bias, w.k_bias, w.v_bias, w.o_bias, w.wi_in_bias, w.wi_gate_bias,
                            w.wo_bias})
      if (!b || !b->empty()) return false;
    if (!w.attn_norm || !w.attn_norm_bias || !w.mlp_norm || !w.mlp_norm_bias || w.mlp_norm->empty())
      return false;
  }
  Tensor qh = s.q->reshaped({n, p.heads, hd});
  Tensor kh = s.k->reshaped({n, p.heads, hd});
  Tensor vh = s.v->reshaped({n, p.heads, hd});
  Tensor attn_h = s.attn->reshaped({n, p.heads, hd});
  if (!packed_flash16_applies(qh, kh, vh, attn_h, batch.desc->max_query_len())) return false;

  void* xn16 = s.xn->data();      // [n, d] bf16 in xn's f32 memory: the norms' only output
  void* attn16 = s.attn->data();  // the attention's only output, likewise
  void* h16 = s.inner->data();    // GeGLU's only output; its GEMMs write into gate's memory
  auto* qkv16 = static_cast<uint16_t*>(
      ctx_->scratch(DeviceContext::kEncoderStackQkv16, static_cast<size_t>(3 * n * d) * 2));
  uint16_t *q16 = qkv16, *k16 = q16 + n * d, *v16 = k16 + n * d;

  // A layer's attention input as bf16 in xn16: its attn_norm of x, or x itself where it has none
  // (ModernBERT's layer 0).
  const auto attention_input = [&](const EncoderLayerRefs& w) {
    if (w.attn_norm->empty())
      ctx_->record(launch_convert,
                   ConvertArgs{x.data_as<const float>(), xn16, ElemType::BF16, n * d},
                   note(op, "convert_bf16", {&x}));
    else
      record_layernorm_bf16(x, *w.attn_norm, *w.attn_norm_bias, p.eps, xn16, op);
  };
  // Short batches: Wi and GeGLU as one stream GEMM launch (CudaOptions::
  // encoder_stream_glu_max_rows); its GeGLU reads the f32 sums, not their bf16 roundings.
  const bool stream_glu = n <= options_.encoder_stream_glu_max_rows;
  attention_input(first);
  for (size_t il = 0; il < layers.size(); ++il) {
    const EncoderLayerRefs& w = layers[il];
    // q, k and v in that order in one [3d, d] matrix (ModernBERT's Wqkv): one GEMM launch of
    // three batches.
    if (follows(*w.q_proj, *w.k_proj) && follows(*w.k_proj, *w.v_proj)) {
      record_gemm_strided_bf16(xn16, w.q_proj->data(), q16, n, d, d, 3, d * d, n * d,
                               note(op, "cublas_gemm_qkv", {s.xn, w.q_proj}));
    } else {
      record_gemm_bf16_out(xn16, *w.q_proj, q16, n, d, d, note(op, "cublas_gemm_q", {s.xn, w.q_proj}));
      record_gemm_bf16_out(xn16, *w.k_proj, k16, n, d, d, note(op, "cublas_gemm_k", {s.xn, w.k_proj}));
      record_gemm_bf16_out(xn16, *w.v_proj, v16, n, d, d, note(op, "cublas_gemm_v", {s.xn, w.v_proj}));
    }
    const PackedRope rope{rope_args(qh, batch.positions, w.rope_theta, op),
                          rope_args(kh, batch.positions, w.rope_theta, op)};
    const PackedBf16 hand_offs{q16, k16, v16, attn16};
    record_attention_packed(qh, kh, vh, batch,
                            {.scale = p.scale, .causal = false, .window = w.window}, attn_h, &rope,
                            op, &hand_offs);
    // x += attn . Wo^T; xn = LayerNorm(x) as bf16 only.
    record_gemm_bf16_in(attn16, *w.o_proj, x.data(), ElemType::F32, true, n, d,
                        note(op, "cublas_gemm_o_residual", {s.attn, w.o_proj, &x}));
    record_layernorm_bf16(x, *w.mlp_norm, *w.mlp_norm_bias, p.eps, xn16, op);
    // h = gelu(xn . Wi_in^T) * (xn . Wi_gate^T) as bf16; x += h . Wo^T.
    if (!stream_glu || !record_stream_geglu16(xn16, n, d, *w.wi_in, *w.wi_gate, h16, op))
      record_glu_bf16(*s.xn, *w.wi_in, *w.wi_gate, *s.inner, *s.gate, nullptr, h16, op,
                      /*geglu=*/true, xn16);
    record_gemm_bf16_in(h16, *w.wo, x.data(), ElemType::F32, true, n, f,
                        note(op, "cublas_gemm_wo_residual", {s.inner, w.wo, &x}));
    if (il + 1 < layers.size()) attention_input(layers[il + 1]);
  }
  shadow_ = {};  // xn's and attn's memory hold bf16, not the f32 a shadow would stand for
  ++encoder_stacks_;
  return true;
}

}  // namespace infera::cuda
