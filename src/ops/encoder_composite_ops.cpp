// The encoder fused ops' defaults (ops/backend.h): each is the composition it is defined as, so a
// backend that does not override one stays correct (bit for bit what the model ran before the
// fused op existed), and the op harness holds an override to the same scalar reference.
#include <cmath>
#include <string>

#include "infera/error.h"
#include "ops/backend.h"

namespace infera {
namespace {

void linear(Backend& b, const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& out) {
  b.matmul(x, weight, out);
  if (!bias.empty()) b.add_bias(out, bias, out);
}

// Float weights without biases: what matmul_multi and matmul_geglu take.
bool plain_weights(std::initializer_list<const Tensor*> weights,
                   std::initializer_list<const Tensor*> biases) {
  bool plain = true;
  for (const Tensor* wt : weights) plain &= !dtype_is_quantized(wt->dtype());
  for (const Tensor* bias : biases) plain &= bias->empty();
  return plain;
}

// Several projections of one input (q/k/v): matmul_multi for plain weights (a backend may prepare
// x once for all of them), else one linear each.
void linear_shared_input(Backend& b, const Tensor& x, std::initializer_list<const Tensor*> weights,
                         std::initializer_list<const Tensor*> biases,
                         std::initializer_list<Tensor*> outs) {
  if (plain_weights(weights, biases)) {
    b.matmul_multi(x, std::span<const Tensor* const>(weights.begin(), weights.size()),
                   std::span<Tensor* const>(outs.begin(), outs.size()));
    return;
  }
  auto bias = biases.begin();
  auto out = outs.begin();
  for (const Tensor* wt : weights) linear(b, x, *wt, **bias++, **out++);
}

}  // namespace

void encoder_stack_composed(Backend& b, Tensor& x, std::span<const EncoderLayerRefs> layers,
                            const Batch& batch, const EncoderStackParams& p,
                            const EncoderStackScratch& s, const ActivationEmit& emit) {
  const int64_t n = x.rank() == 2 ? x.dim(0) : 0;
  if (n == 0 || !s.xn || !s.q || !s.k || !s.v || !s.attn || !s.proj || !s.inner || !s.gate)
    throw InvalidArgument("[encoder_stack] x " + x.shape().str() +
                          " must be [n, hidden] with every scratch tensor given");
  const auto show = [&](const Tensor& t, const char* name, int il) {
    if (emit) emit(t, name, il);
  };
  // Whether layer il's attn_norm was applied by the previous layer's residual add.
  const auto normed_by_previous = [&](size_t il) {
    return il > 0 && il < layers.size() && !layers[il].attn_norm->empty();
  };
  for (size_t il = 0; il < layers.size(); ++il) {
    const EncoderLayerRefs& w = layers[il];
    const int layer = static_cast<int>(il);
    const Tensor& attn_in = w.attn_norm->empty() ? x : *s.xn;
    if (!w.attn_norm->empty() && !normed_by_previous(il))
      b.layernorm(x, *w.attn_norm, *w.attn_norm_bias, p.eps, *s.xn);
    linear_shared_input(b, attn_in, {w.q_proj, w.k_proj, w.v_proj}, {w.q_bias, w.k_bias, w.v_bias},
                        {s.q, s.k, s.v});
    Tensor qh = s.q->reshaped({n, p.heads, p.head_dim});
    Tensor kh = s.k->reshaped({n, p.heads, p.head_dim});
    Tensor attn_h = s.attn->reshaped({n, p.heads, p.head_dim});
    b.rope_attention_packed(qh, kh, s.v->reshaped({n, p.heads, p.head_dim}), batch, w.rope_theta,
                            {.scale = p.scale, .causal = false, .window = w.window}, attn_h);
    show(*s.attn, "attn", layer);
    linear(b, *s.attn, *w.o_proj, *w.o_bias, *s.proj);
    b.add_layernorm(x, *s.proj, *w.mlp_norm, *w.mlp_norm_bias, p.eps, *s.xn);
    show(x, "attn_residual", layer);
    if (plain_weights({w.wi_in, w.wi_gate}, {w.wi_in_bias, w.wi_gate_bias})) {
      b.matmul_geglu(*s.xn, *w.wi_in, *w.wi_gate, *s.inner, *s.gate);
    } else {
      linear_shared_input(b, *s.xn, {w.wi_in, w.wi_gate}, {w.wi_in_bias, w.wi_gate_bias},
                          {s.inner, s.gate});
      b.geglu(*s.inner, *s.gate, *s.inner);
    }
    linear(b, *s.inner, *w.wo, *w.wo_bias, *s.proj);
    if (normed_by_previous(il + 1)) {
      const EncoderLayerRefs& next = layers[il + 1];
      b.add_layernorm(x, *s.proj, *next.attn_norm, *next.attn_norm_bias, p.eps, *s.xn);
    } else {
      b.add(x, *s.proj, x);
    }
    show(x, "layer_out", layer);
  }
}

void Backend::encoder_stack(Tensor& x, std::span<const EncoderLayerRefs> layers,
                            const Batch& batch, const EncoderStackParams& params,
                            const EncoderStackScratch& scratch) {
  encoder_stack_composed(*this, x, layers, batch, params, scratch, {});
}

void Backend::add_layernorm(Tensor& x, const Tensor& delta, const Tensor& weight,
                            const Tensor& bias, float eps, Tensor& out) {
  if (out.data() == x.data() || out.data() == delta.data())
    throw InvalidArgument("[add_layernorm] out must not alias x or delta");
  add(x, delta, x);
  layernorm(x, weight, bias, eps, out);
}

void Backend::matmul_geglu(const Tensor& x, const Tensor& w_in, const Tensor& w_gate, Tensor& out,
                           Tensor& gate) {
  if (out.data() == gate.data())
    throw InvalidArgument("[matmul_geglu] out and gate must be different tensors");
  const Tensor* ws[] = {&w_in, &w_gate};
  Tensor* outs[] = {&out, &gate};
  matmul_multi(x, ws, outs);
  geglu(out, gate, out);
}

void Backend::rope_attention_packed(Tensor& q, Tensor& k, const Tensor& v, const Batch& batch,
                                    double theta, const AttentionParams& params, Tensor& out) {
  rope(q, batch.positions, theta);
  rope(k, batch.positions, theta);
  attention_packed(q, k, v, batch, params, out);
}

}  // namespace infera
