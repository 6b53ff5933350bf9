// The op interface every model is written against, and every backend implements.
// Layer contract: frontends -> engine -> models -> ops (this file) -> backends. Ops know nothing
// of models; models never touch tensor memory directly (it may live on a GPU) and read results
// back only via to_host(). This header names no concrete backend: backend/registry.h makes one.
//
// Conventions for all ops:
// - Activations are F32 row-major; weights may be any dtype supports() accepts for the op.
// - `out` is pre-allocated by the caller with the documented shape; ops check shapes and throw
//   InvalidArgument naming the op ("[matmul] x [4, 1024] vs w [3072, 1000]").
// - Token ids, positions and cache slots come from a Batch that upload_batch() made once per
//   step; no op takes host spans, so a device backend copies the step's indices once.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infera/tensor.h"
#include "ops/batch.h"

namespace infera {

// Work counters a backend keeps for tests and benchmarks (a schedule property, so a device backend
// can count on the host what it launches). Zero where a backend does not count.
struct OpStats {
  // attention_packed: the (query tile, kv head, key tile) blocks of scores it computed, with the
  // tile sizes it used. A dense schedule computes ceil(L / query_tile) * ceil(L / key_tile) *
  // kv_heads blocks for a sequence of L rows; a windowed one only those whose key tile overlaps
  // the union of the query tile's windows.
  int64_t packed_key_tiles = 0;
  int64_t packed_query_tile = 0, packed_key_tile = 0;
  // With set_op_timing(true), backends that time their decode ops (the CPU's): the decode-sized
  // (fewer than 16 rows) weight matmuls and cache attention, as calls, wall seconds and the bytes
  // they read (weights as stored; keys and values of the visible positions), so that a benchmark
  // can hold each to the memory bandwidth and see where a step's time goes.
  struct Timed {
    int64_t calls = 0;
    double seconds = 0, bytes = 0;
  };
  Timed decode_matmul, decode_attention;
};

// One row's sampling for sample_rows: the Sampler's pipeline after its penalties (sample/sampler.h
// has the semantics), with the draw's uniform number supplied by the caller so that the device
// and the host Sampler draw the same token from the same stream.
struct RowSampling {
  float temperature = 1.0f;  // <= 0: greedy (argmax, u unused)
  int32_t top_k = 0;         // 0 or >= width: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  double uniform = 0.0;      // u in [0, 1) for the inverse-CDF draw
};
// What sample_rows chose for one row: id = -1 when the row has no value above -inf; drew = 1
// when the draw consumed `uniform` (0 for greedy rows and for a temperature so small that the
// Sampler turns greedy), so the caller can hand an unused number back to its stream.
struct SampledId {
  int32_t id = -1;
  int32_t drew = 0;
};

// The closed set of ops, for supports() and for the op test harness.
enum class Op : uint8_t {
  Embedding,
  RmsNorm,
  Matmul,
  Rope,
  KvWrite,
  Attention,
  Swiglu,
  Add,
  GatherRows,
  // Encoder ops (ModernBERT).
  LayerNorm,
  Gelu,
  Geglu,
  AddBias,
  AttentionPacked,
  MeanPool,
  // Encoder fused ops (composite defaults, like the fused ops below).
  AddLayerNorm,
  MatmulGeglu,
  RopeAttentionPacked,
  EncoderStack,
  // Fused ops (composite defaults below; a backend overrides them to save launches and passes).
  AddRmsNorm,
  MatmulSwiglu,
  MatmulSwigluDown,
  QkNormRopeKvWrite,
  ResidualMlp,
  RmsNormMatmulMulti,
  OutputMlp,
  DecoderStack,
  ArgmaxRows,
  SampleRows,  // sample_rows; a backend that says no leaves sampling to the host's Sampler
};
std::string_view op_name(Op op);

// One pre-norm decoder layer with per-head q/k RMSNorm (Qwen3) as decoder_stack reads it: its
// weights and its cache.
struct DecoderLayerRefs {
  const Tensor *attn_norm, *q_proj, *k_proj, *v_proj, *q_norm, *k_norm, *o_proj;
  const Tensor *mlp_norm, *gate_proj, *up_proj, *down_proj;
  KvLayer* cache;
};
// decoder_stack's shapes and constants.
struct DecoderStackParams {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  float eps = 1e-6f;
  double rope_theta = 1e6;
  float scale = 1.0f;  // attention's score scale
};
// decoder_stack's activations, [n, width] F32 each (widths: hidden for xn and proj, q_heads x
// head_dim for q and attn, kv_heads x head_dim for k and v, intermediate for gate and up).
struct DecoderStackScratch {
  Tensor *xn, *q, *k, *v, *attn, *proj, *gate, *up;
};

// One pre-norm encoder layer (ModernBERT) as encoder_stack reads it: LayerNorm, q/k/v projections
// of one input, RoPE and packed attention (global or windowed), the o projection, LayerNorm, the
// GeGLU MLP (Wi's input and gate halves, then Wo). Absent tensors are empty, never null: layer 0's
// attn_norm (ModernBERT has none there) and every bias of a model without them.
struct EncoderLayerRefs {
  const Tensor *attn_norm, *attn_norm_bias, *q_proj, *k_proj, *v_proj, *q_bias, *k_bias, *v_bias;
  const Tensor *o_proj, *o_bias, *mlp_norm, *mlp_norm_bias, *wi_in, *wi_gate, *wi_in_bias,
      *wi_gate_bias, *wo, *wo_bias;
  double rope_theta = 1e4;
  int32_t window = -1;  // AttentionParams::window: -1 global
};
// encoder_stack's shapes and constants (heads of q, k and v alike).
struct EncoderStackParams {
  int64_t heads = 0, head_dim = 0;
  float eps = 1e-5f;
  float scale = 1.0f;  // attention's score scale
};
// encoder_stack's activations, [n, width] F32 each (hidden for xn, q, k, v, attn and proj; Wi's
// half for inner and gate).
struct EncoderStackScratch {
  Tensor *xn, *q, *k, *v, *attn, *proj, *inner, *gate;
};
// An observer of a forward's activations (a model's activation hook): the tensor, its name and
// its layer.
using ActivationEmit = std::function<void(const Tensor&, std::string_view, int)>;

class Backend;
// encoder_stack's composition (below), each layer's "attn", "attn_residual" and "layer_out"
// handed to `emit` when it is set: the model's forward with its activation hook.
void encoder_stack_composed(Backend& backend, Tensor& x, std::span<const EncoderLayerRefs> layers,
                            const Batch& batch, const EncoderStackParams& params,
                            const EncoderStackScratch& scratch, const ActivationEmit& emit);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // Whether `op` runs with these dtypes: the weight dtype for Embedding/Matmul/RmsNorm/LayerNorm/
  // AddBias, the cache dtype for KvWrite/Attention, F32 for the elementwise ops, AttentionPacked
  // and MeanPool. A backend may decline; callers (the loader, the op test harness) ask before use
  // and say so.
  virtual bool supports(Op op, std::initializer_list<DType> dtypes) const = 0;

  // --- memory -------------------------------------------------------------------------------
  // A zero-filled buffer on this backend's device.
  virtual Tensor alloc(const std::string& name, DType dtype, Shape shape) = 0;
  // Makes a host weight usable by this backend. The CPU backend returns the same view, so
  // weights stay in place in the mmap; a GPU backend uploads once at load.
  virtual Tensor prepare_weight(const Tensor& host_weight) = 0;
  // prepare_weight of weights that one product may read as a single matrix (a layer's q, k and v
  // projections, which share their input): a device backend places them one after another in one
  // allocation, so that a GEMM can take them as one weight of the rows of all. The CPU backend
  // prepares each alone.
  virtual std::vector<Tensor> prepare_weights(std::span<const Tensor> host_weights) {
    std::vector<Tensor> out;
    out.reserve(host_weights.size());
    for (const Tensor& w : host_weights) out.push_back(prepare_weight(w));
    return out;
  }
  // Copies an F32 tensor to host memory (dst.size() == src.numel()).
  virtual void to_host(const Tensor& src, std::span<float> dst) = 0;
  // Makes the step's indices visible to the ops (one upload on a device backend). `desc` must be
  // valid (BatchDesc::validate) and outlive the returned Batch.
  virtual Batch upload_batch(const BatchDesc& desc) = 0;

  // --- ops ----------------------------------------------------------------------------------
  // out[i, :] = table[ids[i], :]; table [vocab, dim], ids I32 [n], out [n, dim] F32.
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // Row-wise RMSNorm over the last dimension: x [rows, dim], weight [dim], out like x.
  // In place (out aliasing x) is allowed.
  virtual void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // out[n, m] = x[n, k] . w[m, k]^T (w in the Hugging Face [out_features, in_features] layout).
  virtual void matmul(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // Rotary embedding, rotate-half convention, in place: x [n, heads, head_dim]; row i sits at
  // positions[i] (I32 [n]). inv_freq[j] = 1 / theta^(2j / head_dim).
  virtual void rope(Tensor& x, const Tensor& positions, double theta) = 0;
  // Writes row i of k and v ([n, kv_heads, head_dim] F32) into the layer's block pools at cache
  // slot batch.slots[i], converting to the pool's dtype.
  virtual void kv_write(const Tensor& k, const Tensor& v, KvLayer& cache, const Batch& batch) = 0;
  // Grouped-query attention of each sequence's rows over its cached keys and values.
  //   q [T, hq, head_dim]; row i of sequence b attends to the keys of positions allowed by
  //   `params` (causal: <= positions[i]) among [0, seq_lens[b]), read through b's block table.
  //   Head h reads kv head h / (hq / kv_heads). out [T, hq, head_dim]. Softmax in F32.
  virtual void attention(const Tensor& q, const KvLayer& cache, const Batch& batch,
                         const AttentionParams& params, Tensor& out) = 0;
  // out = silu(gate) * up, elementwise; all [n, f]. out may alias gate or up.
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // out = a + b, elementwise, same shapes; out may alias a.
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // dst[i, :] = src[rows[i], :] for rows I32 [r]; src [n, w], dst [r, w] F32.
  virtual void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) = 0;

  // --- encoder ops --------------------------------------------------------------------------
  // Every backend is meant to implement these. One that does not yet inherits the defaults below,
  // which throw InvalidArgument naming the op and the backend; its supports() must then decline
  // the op, so that loaders and the op harness skip it rather than call it.
  // Row-wise LayerNorm over the last dimension, as torch.nn.LayerNorm:
  //   out = (x - mean) / sqrt(var + eps) * weight + bias, var the biased (1/dim) variance.
  // x [rows, dim] F32, weight [dim] and bias [dim] of any weight dtype; an empty `bias` Tensor
  // means none (ModernBERT's norm_bias=false). Mean and variance in F32, two-pass (mean first,
  // then the mean of squared deviations). In place (out aliasing x) is allowed.
  virtual void layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                         Tensor& out) {
    unsupported(Op::LayerNorm);
  }
  // out = gelu(x) elementwise, the exact erf form 0.5 * x * (1 + erf(x / sqrt(2))) (torch's
  // default GELU, not the tanh approximation). F32, same shapes; out may alias x.
  virtual void gelu(const Tensor& x, Tensor& out) { unsupported(Op::Gelu); }
  // GeGLU: out = gelu(input) * gate elementwise, gelu the exact erf form above; all [n, f] F32.
  // ModernBERT's MLP splits Wi's output into (input, gate) in that order. out may alias either.
  virtual void geglu(const Tensor& input, const Tensor& gate, Tensor& out) {
    unsupported(Op::Geglu);
  }
  // out[i, :] = x[i, :] + bias[:]; x [n, m] F32 (any rank, m its last dim), bias [m] of any
  // weight dtype. out may alias x.
  virtual void add_bias(const Tensor& x, const Tensor& bias, Tensor& out) {
    unsupported(Op::AddBias);
  }
  // Attention of packed sequences over their own rows (encoders: no KV cache).
  //   q [T, hq, d], k and v [T, kv_heads, d] F32, out [T, hq, d]; T = batch.num_tokens().
  //   Sequence b owns rows [qs[b], qs[b+1]) (qs = batch.query_start); its rows attend only to
  //   keys of the same sequence. Distances are row offsets within the sequence (an encoder
  //   batch has positions[i] = i - qs[b]; positions and seq_lens are not read here). Row at offset
  //   i sees key offset j when: not params.causal or j <= i; and params.window < 0 (global) or
  //   |i - j| <= params.window (inclusive; ModernBERT's local layers use local_attention / 2).
  //   Head h reads kv head h / (hq / kv_heads). Scores q.k * params.scale (scale > 0, else
  //   InvalidArgument), softmax in F32 over the visible keys only (masked keys contribute exactly
  //   0, no -inf arithmetic). A row with no visible key cannot occur (j = i is always visible).
  // Work must follow the window: a backend splits each sequence into query tiles and key tiles
  // (its own sizes, aligned to the sequence's first row), computes scores only for the key tiles
  // that overlap the union of the query tile's windows (no dense L x L mask), and counts them in
  // op_stats(). Tests compare that count with the one computed from the definition.
  virtual void attention_packed(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Batch& batch, const AttentionParams& params, Tensor& out) {
    unsupported(Op::AttentionPacked);
  }
  // Mean of each sequence's rows: out[b, :] = sum_{i in [qs[b], qs[b+1])} x[i, :] / rows(b),
  // summed in F32 in row order. x [T, w] F32, out [B, w] F32 (B = batch.num_seqs()).
  virtual void mean_pool(const Tensor& x, const Batch& batch, Tensor& out) {
    unsupported(Op::MeanPool);
  }
  // The encoder's fused ops. Like the fused ops below, each has a default composed of the ops it
  // is defined as, means exactly that composition, and is overridden to save passes and launches.
  //
  // Residual add then the next LayerNorm: x = x + delta; out = layernorm(x, weight, bias, eps).
  // x [rows, dim] F32 (updated in place), delta like x, out like x (must not alias x or delta).
  virtual void add_layernorm(Tensor& x, const Tensor& delta, const Tensor& weight,
                             const Tensor& bias, float eps, Tensor& out);
  // The GeGLU MLP's first half: out = gelu(x . w_in^T) * (x . w_gate^T), as matmul_multi(x,
  // {w_in, w_gate}, {out, gate}) then geglu(out, gate, out). out and gate are [n, f] F32; `gate`
  // is scratch the backend may use or leave alone, and its contents after the call are
  // unspecified.
  virtual void matmul_geglu(const Tensor& x, const Tensor& w_in, const Tensor& w_gate, Tensor& out,
                            Tensor& gate);
  // The encoder's attention stage: rope(q, batch.positions, theta), rope(k, batch.positions,
  // theta), then attention_packed(q, k, v, batch, params, out); q and k are left rotated, as the
  // composition leaves them.
  virtual void rope_attention_packed(Tensor& q, Tensor& k, const Tensor& v, const Batch& batch,
                                     double theta, const AttentionParams& params, Tensor& out);
  // A stack of encoder layers over the residual stream x [n, hidden] F32 (updated in place; the
  // batch's sequences packed, as attention_packed reads them), as exactly this composition per
  // layer i (w = layers[i]; linear = matmul, then add_bias where there is a bias):
  //   i == 0 with an attn_norm: layernorm(x, w.attn_norm, w.attn_norm_bias, eps, xn)
  //   q/k/v = the projections of xn (of x where w.attn_norm is empty): matmul_multi without
  //           biases and block-quantized weights, else one linear each
  //   rope_attention_packed(q, k, v, batch, w.rope_theta, {scale, bidirectional, w.window}, attn)
  //   proj = linear(attn, w.o_proj); add_layernorm(x, proj, w.mlp_norm, w.mlp_norm_bias, eps, xn)
  //   inner = gelu(xn . wi_in^T) * (xn . wi_gate^T): matmul_geglu without biases and quantized
  //           weights, else the two linears and geglu
  //   proj = linear(inner, w.wo); then add_layernorm(x, proj, the next layer's attn_norm, ...,
  //          xn) where the next layer has one, else add(x, proj, x)
  // The scratch tensors' contents afterwards are unspecified. A backend overrides it to skip the
  // f32 round trips between the layers' GEMMs (CUDA: bf16 weights, the flash attention's shapes).
  virtual void encoder_stack(Tensor& x, std::span<const EncoderLayerRefs> layers,
                             const Batch& batch, const EncoderStackParams& params,
                             const EncoderStackScratch& scratch);

  // --- fused ops ----------------------------------------------------------------------------
  // Each has a default composed of the ops above (so every backend runs them correctly as is) and
  // means exactly that composition; a backend overrides one to do it in fewer passes and
  // launches. Dtype support is that of the ops they compose.
  //
  // Residual add then the next norm: x = x + delta; out = rmsnorm(x, weight, eps). x [rows, dim]
  // F32 (updated in place), delta like x, out like x (must not alias x or delta).
  virtual void add_rmsnorm(Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                           Tensor& out);
  // outs[i] = x . ws[i]^T for every i (one input, several weights with its in_features: the
  // q/k/v projections), as matmul(x, *ws[i], *outs[i]).
  virtual void matmul_multi(const Tensor& x, std::span<const Tensor* const> ws,
                            std::span<Tensor* const> outs);
  // The gated MLP's first half: gate = silu(x . w_gate^T) * (x . w_up^T). gate and up are
  // [n, f] F32; `up` is scratch the backend may use or leave alone, and its contents after the
  // call are unspecified.
  virtual void matmul_swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                             Tensor& gate, Tensor& up);
  // The whole gated MLP: out = (silu(x . w_gate^T) * (x . w_up^T)) . w_down^T, as
  // matmul_swiglu(x, w_gate, w_up, gate, up) then matmul(gate, w_down, out). gate and up [n, f]
  // F32 are scratch the backend may use or leave alone (contents unspecified after the call), so
  // a backend need not write the f32 SwiGLU result that only the down projection reads.
  virtual void matmul_swiglu_down(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                                  const Tensor& w_down, Tensor& gate, Tensor& up, Tensor& out);
  // Attention's input stage: per-head RMSNorm of q [n, hq, d] and k [n, hkv, d] (weights
  // q_norm, k_norm [d]), RoPE on both at batch.positions, both in place, then k and v
  // [n, hkv, d] written to the cache at batch.slots, as rmsnorm x2, rope x2, kv_write.
  virtual void qk_norm_rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm,
                                     const Tensor& k_norm, float eps, double theta, KvLayer& cache,
                                     const Batch& batch);
  // A pre-norm decoder layer's second half, from the attention's output projection to the next
  // layer's input norm, as exactly this composition:
  //   add_rmsnorm(x, delta, mlp_norm, eps, xn);          // x += delta; xn = rmsnorm(x)
  //   matmul_swiglu_down(xn, w_gate, w_up, w_down, gate, up, proj);
  //                     // proj = (silu(xn.Wg^T) * (xn.Wu^T)) . Wd^T
  //   next_norm set:   add_rmsnorm(x, proj, next_norm, eps, xn);
  //   next_norm empty: add(x, proj, x)                   (the last layer: xn keeps the MLP norm)
  // x, delta, xn, proj [n, d] F32; gate, up [n, f] F32 scratch whose contents afterwards are
  // unspecified (as proj's). delta may alias proj (the model's o projection writes there); xn
  // must alias neither x nor delta. A backend overrides it to run the whole block as one kernel
  // where it pays (CUDA: one decode row, bf16 weights).
  virtual void residual_mlp(Tensor& x, const Tensor& delta, const Tensor& mlp_norm,
                            const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                            const Tensor& next_norm, float eps, Tensor& xn, Tensor& gate,
                            Tensor& up, Tensor& proj);
  // A pre-norm layer's input norm and projections: rmsnorm(x, norm, eps, xn) then
  // matmul_multi(xn, ws, outs) (the first layer's q/k/v). xn must not alias x or an output.
  virtual void rmsnorm_matmul_multi(const Tensor& x, const Tensor& norm, float eps, Tensor& xn,
                                    std::span<const Tensor* const> ws,
                                    std::span<Tensor* const> outs);
  // A pre-norm decoder layer after its attention, up to the next layer's projections:
  //   matmul(attn, w_o, proj);
  //   residual_mlp(x, proj, mlp_norm, w_gate, w_up, w_down, next_norm, eps, xn, gate, up, proj);
  //   next_ws not empty: matmul_multi(xn, next_ws, next_outs)   (the next layer's q/k/v)
  // next_ws must be empty when next_norm is (the last layer). attn [n, q] F32; the others as in
  // residual_mlp (proj, gate, up scratch, contents unspecified afterwards); next_outs must alias
  // none of x, xn, attn. A backend overrides it to move each residual add into the epilogue of
  // the projection before it and each norm into the prologue of the projection after it (CUDA:
  // one decode row, bf16 weights): per layer two launches fewer than the composition.
  virtual void output_mlp(const Tensor& attn, const Tensor& w_o, Tensor& x, const Tensor& mlp_norm,
                          const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                          const Tensor& next_norm, std::span<const Tensor* const> next_ws,
                          std::span<Tensor* const> next_outs, float eps, Tensor& xn, Tensor& gate,
                          Tensor& up, Tensor& proj);
  // A stack of pre-norm decoder layers over the residual stream x [n, hidden] F32 (updated in
  // place), causal attention over each layer's cache, as exactly this composition per layer i
  // (w = layers[i], the model's forward without hooks):
  //   i == 0: rmsnorm_matmul_multi(x, w.attn_norm, eps, xn, {q, k, v proj}, {q, k, v})
  //   qk_norm_rope_kv_write(q, k, v, w.q_norm, w.k_norm, eps, theta, *w.cache, batch)
  //   attention(q, *w.cache, batch, {scale, causal}, attn)
  //   output_mlp(attn, w.o_proj, x, w.mlp_norm, w.gate/up/down, next layer's attn_norm (none
  //              for the last), next layer's {q, k, v proj} -> {q, k, v}, eps, xn, gate, up,
  //              proj)
  // The scratch tensors' contents afterwards are unspecified. A backend overrides it to run the
  // whole stack as one kernel where it pays (CUDA: one decode row, bf16 weights).
  virtual void decoder_stack(Tensor& x, std::span<const DecoderLayerRefs> layers,
                             const Batch& batch, const DecoderStackParams& params,
                             const DecoderStackScratch& scratch);
  // Greedy choice per row, delivered to the host: ids[i] = the index of the largest value of row
  // i of x [rows, width] F32 (ties: the lowest index, as torch.argmax; NaN never wins), or -1
  // when the row has no value above -inf. ids.size() == rows. A device backend computes it where
  // x lives, so only the ids cross to the host.
  virtual void argmax_rows(const Tensor& x, std::span<int32_t> ids);
  // Sampling per row where x [rows, width] F32 lives, delivered to the host: out[i] is what
  // Sampler::sample (without penalties) picks from row i with rows[i]'s filters and rows[i].uniform
  // as its draw — temperature, top-k (ties with the k-th value stay), top-p (HF: keep the
  // smallest top set whose mass reaches top_p, ties ordered by lower index), min-p, then the
  // inverse CDF over the survivors in the Sampler's order (by logit when top-k is on, else by
  // index). Only the ids cross to the host. Backends that report supports(SampleRows) false throw.
  virtual void sample_rows(const Tensor& x, std::span<const RowSampling> rows,
                           std::span<SampledId> out);

  // Counters since the last reset_op_stats() (see OpStats).
  virtual OpStats op_stats() const { return {}; }
  virtual void reset_op_stats() {}
  // Whether to time the decode ops into OpStats (off by default: two clock reads an op).
  virtual void set_op_timing(bool on) { (void)on; }

  // Waits for queued work (no-op on the CPU).
  virtual void synchronize() {}

 protected:
  // Throws InvalidArgument "[op] is not implemented by the NAME backend".
  [[noreturn]] void unsupported(Op op) const;
};

}  // namespace infera
