// The encoder fused ops' defaults (ops/backend.h): each is the composition it is defined as, so a
// backend that does not override one stays correct (bit for bit what the model ran before the
// fused op existed), and the op harness holds an override to the same scalar reference.
#include "infera/error.h"
#include "ops/backend.h"

namespace infera {

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
