// Backend::decoder_stack where cuBLAS runs the GEMMs (prefill; batched decode past the stream
// GEMM's rows): the composition's launches less its f32 round trips (CudaOptions::gemm_stack).
//
// Why: at 8x512 prefill a third of the non-GEMM time was add_rmsnorm passes and the qk-norm
// kernel moving f32 activations that only feed bf16 GEMMs (issue-11-pf8.md's profile). Here
//   - the o and down projections add into the residual x in the GEMM (beta 1): the f32 sum is the
//     one the composition's add makes, without writing and re-reading the projection;
//   - the norms after them write only the bf16 input of the next GEMMs (into xn's memory);
//   - with gemm_stack_qkv16 the q/k/v GEMMs write bf16 and the qk-norm/RoPE kernel reads that and
//     sends k only to the cache; where the wgmma prefill attention runs, q too goes to it as the
//     scaled bf16 that kernel would have rounded it to, and the attention writes only bf16.
// Per layer: [norm ->] q/k/v GEMMs -> qk-norm/RoPE/KV write -> attention -> o GEMM (+= x) ->
// norm -> gate/up GEMMs + SwiGLU (bf16) -> down GEMM (+= x) -> the next layer's norm.
// With the TMA GEMMs of our own (tma_gemm.cuh; CudaOptions::qkv_gemm, glu_gemm, residual_gemm,
// each off by default) the q/k/v GEMM and the qk-norm are one launch, gate/up and SwiGLU one, and
// o / down run on that kernel instead of cuBLAS.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "backend/cuda/qkv_gemm.h"
#include "infera/error.h"

namespace infera::cuda {

void CudaBackend::record_norm_bf16(const Tensor& x, const Tensor& w, float eps, void* out16,
                                   const char* op) {
  expect_float_on_device(w, op);
  const int64_t dim = row_width(x), rows = row_count(x);
  INFERA_CUDA_EXPECT(w.numel() == dim, op, shapes(x, w));
  AddRmsNormArgs a{x.data_as<float>(), nullptr, w.data(), nullptr, rows, dim,
                   elem_type(w.dtype()), eps, out16, decode_tune()};
  ctx_->record(launch_add_rmsnorm, a, note(op, "rmsnorm_bf16", {&x, &w}));
}

bool CudaBackend::record_qkv_gemm(const void* x_bf16, const Tensor& w_qkv, int64_t k,
                                  const QkNormRopeKvArgs& qa, const OpNote& nt) {
  if (!options_.qkv_gemm) return false;
  const cudaDeviceProp& prop = ctx_->properties();
  QkvGemmArgs a;
  std::memset(static_cast<void*>(&a), 0, sizeof a);  // padding too: it is the step's key
  a.x = x_bf16;
  a.w = w_qkv.data();
  a.k = k;
  a.qa = qa;
  a.schedule = {0, prop.multiProcessorCount, options_.tma_gemm_pingpong ? 1 : 0};
  if (qkv_gemm_unsupported(a, prop.major, prop.minor)) return false;
  ctx_->record(launch_qkv_gemm, a, nt);
  ++qkv_gemms_;
  return true;
}

bool CudaBackend::record_gemm_stack(Tensor& x, std::span<const DecoderLayerRefs> layers,
                                    const Batch& batch, const DecoderStackParams& p,
                                    const DecoderStackScratch& s) {
  const char* op = "decoder_stack";
  if (!options_.gemm_stack || !options_.fused || options_.exact_f32 || options_.skinny_gemm ||
      options_.fuse_qk_attention || layers.empty() || x.device() != Device::CUDA ||
      x.dtype() != DType::F32 || x.rank() != 2)
    return false;
  const int64_t n = x.dim(0), d = x.dim(1), hd = p.head_dim;
  const int64_t qw = p.q_heads * hd, kvw = p.kv_heads * hd;
  // Past the GEMV and the stream GEMM; the one-block-per-row norm kernel's widths.
  if (n <= options_.gemv_max_rows || stream_gemm_rows(n) || d % 8 != 0 || d > 16384 ||
      qw % 8 != 0 || kvw % 8 != 0 || !is_aligned16(x.data()))
    return false;
  if (!s.xn || !s.q || !s.k || !s.v || !s.attn || !s.proj || !s.gate || !s.up) return false;
  for (const Tensor* t : {s.xn, s.q, s.attn, s.gate, s.up})
    if (t->dtype() != DType::F32 || t->device() != Device::CUDA || !is_aligned16(t->data()))
      return false;
  if (s.xn->numel() != n * d || s.q->numel() != n * qw || s.k->numel() != n * kvw ||
      s.v->numel() != n * kvw || s.attn->numel() != n * qw)
    return false;
  const DecoderLayerRefs& first = layers[0];
  const int64_t f = first.gate_proj && first.gate_proj->rank() == 2 ? first.gate_proj->dim(0) : 0;
  if (f <= 0 || f % 8 != 0 || s.gate->numel() != n * f || s.up->numel() != n * f) return false;
  for (const DecoderLayerRefs& w : layers)
    if (!w.cache || !is_bf16_matrix(w.q_proj, qw, d) || !is_bf16_matrix(w.k_proj, kvw, d) ||
        !is_bf16_matrix(w.v_proj, kvw, d) || !is_bf16_matrix(w.o_proj, d, qw) ||
        !is_bf16_matrix(w.gate_proj, f, d) || !is_bf16_matrix(w.up_proj, f, d) ||
        !is_bf16_matrix(w.down_proj, d, f) || !glu_bf16_applies(*w.gate_proj, *w.up_proj, n) ||
        !w.attn_norm || !w.mlp_norm || !w.q_norm || !w.k_norm ||
        w.q_norm->dtype() != w.k_norm->dtype())
      return false;

  const int64_t max_vectors =
      batch.desc ? int64_t{batch.desc->max_query_len()} * (p.q_heads / p.kv_heads) : 0;
  Tensor qh = s.q->reshaped({n, p.q_heads, hd});
  Tensor kh = s.k->reshaped({n, p.kv_heads, hd});
  Tensor vh = s.v->reshaped({n, p.kv_heads, hd});
  Tensor attn_h = s.attn->reshaped({n, p.q_heads, hd});
  void* xn16 = s.xn->data();  // [n, d] bf16 in xn's f32 memory: the norms' only output
  // bf16 q/k/v from separate GEMMs: [n, qw], [n, kvw], [n, kvw] one after another; from one
  // GEMM: the rows of [n, qw + 2 kvw], with the wgmma attention's scaled q in [n, qw] after them.
  const int64_t qkv_row = qw + 2 * kvw;
  auto* qkv16 = static_cast<uint16_t*>(
      ctx_->scratch(DeviceContext::kGemmStackQkv16, static_cast<size_t>(n * (qkv_row + qw)) * 2));
  uint16_t *q16 = qkv16, *k16 = q16 + n * qw, *v16 = k16 + n * kvw;

  record_norm_bf16(x, *first.attn_norm, p.eps, xn16, op);
  for (size_t il = 0; il < layers.size(); ++il) {
    const DecoderLayerRefs& w = layers[il];
    // q/k/v: bf16 where the qk-norm's bf16-input kernel runs (head_dim 128/256, bf16 cache),
    // else f32 as the composition (the kernel then also writes the rotated k back, unread).
    QkNormRopeKvArgs qa =
        qk_norm_rope_kv_args(qh, kh, vh, *w.q_norm, *w.k_norm, p.eps, p.rope_theta, *w.cache, batch);
    const bool qkv_bf16 = options_.gemm_stack_qkv16 && qk_norm_bf16_kernel_applies(qa);
    const ElemType qkv_type = qkv_bf16 ? ElemType::BF16 : ElemType::F32;
    // One GEMM where q, k and v lie one after another (Backend::prepare_weights): at 64 rows a
    // cuBLAS launch costs ~5 us whatever its size, so this is a launch a layer less than q and
    // the k/v pair (CudaOptions::gemm_stack_qkv_one).
    const bool qkv_one = qkv_bf16 && options_.gemm_stack_qkv_one && follows(*w.q_proj, *w.k_proj) &&
                         follows(*w.k_proj, *w.v_proj);
    // The wgmma prefill attention reads q as the scaled bf16 it would round it to (same bits),
    // written by the qk-norm kernel over its bf16 input, and writes only its bf16 output.
    const bool attention16 = options_.gemm_stack_attention16 &&
                             flash_wgmma_applies(qh, attn_h, *w.cache, max_vectors);
    const bool q_bf16 = qkv_bf16 && attention16;  // (qkv_bf16: a bf16 cache)
    if (qkv_bf16) {
      qa.q16 = q16;
      qa.k16 = qkv_one ? q16 + qw : k16;
      qa.v16 = qkv_one ? q16 + qw + kvw : v16;
      qa.qkv16_row = qkv_one ? qkv_row : 0;
      qa.k = nullptr;
    }
    // The attention's [n, qw] bf16 q: in place over the GEMM's q, or after the one GEMM's rows.
    uint16_t* const q16_attention = qkv_one ? qkv16 + n * qkv_row : q16;
    if (q_bf16) {
      qa.q16_out = q16_attention;
      qa.q16_scale = static_cast<double>(p.scale * 1.4426950408889634f);  // the kernel's base 2
    }
    // The GEMM and the qk-norm as one kernel (CudaOptions::qkv_gemm), else cuBLAS then the kernel.
    if (qkv_one && q_bf16 &&
        record_qkv_gemm(xn16, *w.q_proj, d, qa, note(op, "qkv_gemm", {s.xn, w.q_proj}))) {
      ++gemm_stack_qkv_one_;
    } else {
      if (qkv_one) {
        record_gemm_strided_bf16(xn16, w.q_proj->data(), qkv16, n, d, qkv_row, 1, 0, 0,
                                 note(op, "cublas_gemm_qkv", {s.xn, w.q_proj}));
        ++gemm_stack_qkv_one_;
      } else {
        void* outs[] = {qkv_bf16 ? static_cast<void*>(q16) : s.q->data(),
                        qkv_bf16 ? static_cast<void*>(k16) : s.k->data(),
                        qkv_bf16 ? static_cast<void*>(v16) : s.v->data()};
        record_gemm_bf16_in(xn16, *w.q_proj, outs[0], qkv_type, false, n, d,
                            note(op, "cublas_gemm_q", {s.xn, w.q_proj}));
        if (!record_gemm_pair(xn16, *w.k_proj, *w.v_proj, outs[1], outs[2], qkv_type, n, d,
                              note(op, "cublas_gemm_pair_kv", {s.xn, w.k_proj}))) {
          record_gemm_bf16_in(xn16, *w.k_proj, outs[1], qkv_type, false, n, d,
                              note(op, "cublas_gemm_k", {s.xn, w.k_proj}));
          record_gemm_bf16_in(xn16, *w.v_proj, outs[2], qkv_type, false, n, d,
                              note(op, "cublas_gemm_v", {s.xn, w.v_proj}));
        }
      }
      ctx_->record(launch_qk_norm_rope_kv, qa,
                   note(op, "qk_norm_rope_kv", {&qh, &kh, &w.cache->keys}));
    }
    stack_attention_ = {qh.data_as<const float>(), q_bf16 ? q16_attention : nullptr, attention16,
                        false};
    attention(qh, *w.cache, batch, {.scale = p.scale, .causal = true}, attn_h);
    const bool taken = stack_attention_.taken;
    stack_attention_ = {};
    // (flash_wgmma_applies is the rule attention() follows: a q16 it did not read would leave
    // the attention reading an unwritten q.)
    if (q_bf16 && !taken) throw std::logic_error("decoder_stack: bf16 queries not taken");
    // x += attn . Wo^T, from the attention's bf16 shadow where it wrote one.
    const void* attn16 = bf16_input(*s.attn, n, qw);
    record_gemm_bf16_in(attn16, *w.o_proj, x.data(), ElemType::F32, true, n, qw,
                        note(op, "cublas_gemm_o_residual", {s.attn, w.o_proj, &x}));
    record_norm_bf16(x, *w.mlp_norm, p.eps, xn16, op);
    // h = silu(xn . Wg^T) * (xn . Wu^T) as bf16 in gate's memory; x += h . Wd^T.
    void* h16 = s.gate->data();
    record_glu_bf16(*s.xn, *w.gate_proj, *w.up_proj, *s.gate, *s.up, nullptr, h16, op, false,
                    xn16);
    record_gemm_bf16_in(h16, *w.down_proj, x.data(), ElemType::F32, true, n, f,
                        note(op, "cublas_gemm_down_residual", {s.gate, w.down_proj, &x}));
    if (il + 1 < layers.size()) record_norm_bf16(x, *layers[il + 1].attn_norm, p.eps, xn16, op);
  }
  shadow_ = {};  // xn's memory holds bf16, not the f32 xn a shadow would stand for
  ++gemm_stacks_;
  return true;
}

}  // namespace infera::cuda
