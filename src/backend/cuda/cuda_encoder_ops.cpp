// The CUDA backend's encoder ops (ModernBERT; see ops/backend.h): host checks, then one launch
// each. attention_packed counts the key tiles its schedule visits (OpStats), computed on the host
// from the batch with the same rule the kernel follows.
#include <stdexcept>
#include <string>

#include "backend/cuda/attention_flash_wgmma.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/op_checks.h"
#include "infera/error.h"

namespace infera::cuda {

namespace {
// layernorm's (and add_layernorm's) argument checks, then its launch arguments (no shadow, the
// two-pass kernel). out nullptr: no f32 output (record_layernorm_bf16 sets the bf16 one).
LayerNormArgs layernorm_args(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                             const Tensor* out, const char* op) {
  expect_f32(x, op);
  if (out) expect_f32(*out, op);
  expect_float_on_device(weight, op);
  const int64_t dim = row_width(x);
  INFERA_CUDA_EXPECT(weight.numel() == dim && (!out || out->numel() == x.numel()), op,
                     shapes(x, weight));
  if (!bias.empty()) {
    expect_float_on_device(bias, op);
    INFERA_CUDA_EXPECT(bias.numel() == dim && bias.dtype() == weight.dtype(), op,
                       "bias " + bias.shape().str() + " must match weight " + weight.shape().str() +
                           " and its dtype");
  }
  LayerNormArgs a{};
  a.x = x.data_as<const float>();
  a.weight = weight.data();
  a.bias = bias.empty() ? nullptr : bias.data();
  a.out = out ? out->data_as<float>() : nullptr;
  a.rows = row_count(x);
  a.dim = dim;
  a.weight_type = elem_type(weight.dtype());
  a.eps = eps;
  return a;
}
// attention_packed on tensor cores (bf16 operands) for these shapes, else the f32 kernel (also
// the exact mode). (It stages rows with 16-byte loads: q, k, v must start 16-byte aligned.)
bool packed_mma_applies(const CudaOptions& o, const Tensor& q, const Tensor& k, const Tensor& v) {
  const bool aligned =
      (reinterpret_cast<uintptr_t>(q.data()) | reinterpret_cast<uintptr_t>(k.data()) |
       reinterpret_cast<uintptr_t>(v.data())) %
          16 ==
      0;
  const int64_t hd = q.dim(2);
  return o.packed_mma && !o.exact_f32 && q.dim(1) == k.dim(1) && hd % 16 == 0 &&
         hd <= kPackedMmaMaxHeadDim && aligned;
}
// Whether every row's position is its offset in its sequence (what the packed kernels assume for
// windows, and the wgmma kernel's RoPE inside for the rotation), once per uploaded batch.
bool positions_are_offsets(const UploadedBatch& u) {
  if (u.positions_are_offsets < 0) {
    const BatchDesc& d = *u.desc;
    bool offsets = d.positions.size() == static_cast<size_t>(d.num_tokens());
    for (int64_t s = 0; offsets && s < d.num_seqs(); ++s) {
      const int32_t begin = d.query_start[static_cast<size_t>(s)];
      for (int32_t r = begin; offsets && r < d.query_start[static_cast<size_t>(s + 1)]; ++r)
        offsets = d.positions[static_cast<size_t>(r)] == r - begin;
    }
    u.positions_are_offsets = offsets ? 1 : 0;
  }
  return u.positions_are_offsets == 1;
}
}  // namespace

void CudaBackend::layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                            Tensor& out) {
  const char* op = "layernorm";
  LayerNormArgs a = layernorm_args(x, weight, bias, eps, &out, op);
  a.out_bf16 = shadow_buffer(out);
  a.in_registers = options_.layernorm_in_registers ? 1 : 0;
  ctx_->record(launch_layernorm, a, note(op, "layernorm", {&x, &weight}));
  publish_shadow(out, a.out_bf16);
}

void CudaBackend::record_layernorm_bf16(const Tensor& x, const Tensor& w, const Tensor& b,
                                        float eps, void* out16, const char* op) {
  LayerNormArgs a = layernorm_args(x, w, b, eps, nullptr, op);
  a.out_bf16 = out16;
  a.in_registers = 1;
  INFERA_CUDA_EXPECT(layernorm_rows_apply(a), op, "rows the in-register LayerNorm cannot take");
  ctx_->record(launch_layernorm, a, note(op, "layernorm_bf16", {&x, &w}));
}

// One pass where the in-register LayerNorm applies (the add's sum written back to x as the row is
// loaded): bit for bit the add kernel then that LayerNorm. Elsewhere the composition.
void CudaBackend::add_layernorm(Tensor& x, const Tensor& delta, const Tensor& weight,
                                const Tensor& bias, float eps, Tensor& out) {
  const char* op = "add_layernorm";
  LayerNormArgs a = layernorm_args(x, weight, bias, eps, &out, op);
  expect_f32(delta, op);
  INFERA_CUDA_EXPECT(delta.numel() == x.numel(), op, shapes(x, delta));
  INFERA_CUDA_EXPECT(out.data() != x.data() && out.data() != delta.data(), op,
                     "out must not alias x or delta");
  a.delta = delta.data_as<const float>();
  a.sum_out = x.data_as<float>();
  if (!options_.fused || !options_.layernorm_in_registers || !layernorm_rows_apply(a))
    return Backend::add_layernorm(x, delta, weight, bias, eps, out);
  a.out_bf16 = shadow_buffer(out);
  ctx_->record(launch_layernorm, a, note(op, "add_layernorm", {&x, &weight}));
  publish_shadow(out, a.out_bf16);
}

void CudaBackend::gelu(const Tensor& x, Tensor& out) {
  const char* op = "gelu";
  expect_f32(x, op);
  expect_f32(out, op);
  INFERA_CUDA_EXPECT(out.numel() == x.numel(), op, shapes(x, out));
  ctx_->record(launch_gelu,
               BinaryArgs{x.data_as<const float>(), nullptr, out.data_as<float>(), x.numel()},
               note(op, "gelu", {&x}));
}

void CudaBackend::geglu(const Tensor& input, const Tensor& gate, Tensor& out) {
  const char* op = "geglu";
  expect_f32(input, op);
  expect_f32(gate, op);
  expect_f32(out, op);
  INFERA_CUDA_EXPECT(gate.numel() == input.numel() && out.numel() == input.numel(), op,
                     shapes(input, gate));
  void* shadow = shadow_buffer(out);
  ctx_->record(launch_gelu,
               BinaryArgs{input.data_as<const float>(), gate.data_as<const float>(),
                          out.data_as<float>(), input.numel(), shadow},
               note(op, "geglu", {&input, &gate}));
  publish_shadow(out, shadow);
}

// bf16 weights of one shape: within the skinny GEMM's rows one launch with the GeGLU epilogue (as
// matmul_swiglu's); past them both GEMMs write bf16 (into gate's f32 memory, [n, f] f32 holds
// [2, n, f] bf16) and one kernel applies GeGLU to them, writing out in f32 and its bf16 shadow for
// Wo: the GEMM outputs are rounded to bf16 first (CudaOptions::glu_bf16_gemm, as matmul_swiglu).
// Elsewhere the composition.
void CudaBackend::matmul_geglu(const Tensor& x, const Tensor& w_in, const Tensor& w_gate,
                               Tensor& out, Tensor& gate) {
  const char* op = "matmul_geglu";
  expect_f32(x, op);
  INFERA_CUDA_EXPECT(out.data() != gate.data(), op, "out and gate must be different tensors");
  const int64_t n = row_count(x);
  if (options_.fused && w_in.shape() == w_gate.shape()) {
    const Tensor* ws[] = {&w_in, &w_gate};
    Tensor* outs[] = {&out, &gate};
    if (record_skinny(x, ws, outs, kSkinnyGeglu, op)) return;
  }
  if (!glu_bf16_applies(w_in, w_gate, n)) return Backend::matmul_geglu(x, w_in, w_gate, out, gate);
  matmul_checks(x, w_in, out);
  matmul_checks(x, w_gate, gate);
  void* shadow = shadow_buffer(out);
  record_glu_bf16(x, w_in, w_gate, out, gate, out.data_as<float>(), shadow, op, /*geglu=*/true);
  publish_shadow(out, shadow);
}

void CudaBackend::add_bias(const Tensor& x, const Tensor& bias, Tensor& out) {
  const char* op = "add_bias";
  expect_f32(x, op);
  expect_f32(out, op);
  expect_float_on_device(bias, op);
  const int64_t width = row_width(x);
  INFERA_CUDA_EXPECT(bias.numel() == width && out.numel() == x.numel(), op, shapes(x, bias));
  AddBiasArgs a{x.data_as<const float>(), bias.data(), out.data_as<float>(), row_count(x), width,
                elem_type(bias.dtype())};
  ctx_->record(launch_add_bias, a, note(op, "add_bias", {&x, &bias}));
}

void CudaBackend::mean_pool(const Tensor& x, const Batch& batch, Tensor& out) {
  const char* op = "mean_pool";
  expect_f32(x, op);
  expect_f32(out, op);
  const BatchDesc& d = *batch.desc;
  INFERA_CUDA_EXPECT(!batch.query_start.empty(), op, "the batch has no query_start");
  const UploadedBatch& u = find_batch(batch.query_start, kQueryStart, op);
  INFERA_CUDA_EXPECT(u.desc == &d, op, "query_start of another batch");
  const int64_t width = row_width(x), seqs = d.num_seqs();
  INFERA_CUDA_EXPECT(x.rank() == 2 && row_count(x) == d.num_tokens(), op,
                     "x " + x.shape().str() + " for " + std::to_string(d.num_tokens()) + " tokens");
  INFERA_CUDA_EXPECT(out.rank() == 2 && out.dim(0) == seqs && out.dim(1) == width, op,
                     shapes(x, out));
  INFERA_CUDA_EXPECT(u.min[kQueryStart] >= 0 && u.max[kQueryStart] <= row_count(x), op,
                     "query_start outside the rows of x");
  INFERA_CUDA_EXPECT(seqs <= 65535, op, "more than 65535 sequences");
  MeanPoolArgs a{x.data_as<const float>(), batch.query_start.data_as<const int32_t>(),
                 out.data_as<float>(), seqs, width};
  ctx_->record(launch_mean_pool, a, note(op, "mean_pool", {&x, &out}));
}

void CudaBackend::attention_packed(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Batch& batch, const AttentionParams& params, Tensor& out) {
  record_attention_packed(q, k, v, batch, params, out, nullptr, "attention_packed");
}

void CudaBackend::rope_attention_packed(Tensor& q, Tensor& k, const Tensor& v, const Batch& batch,
                                        double theta, const AttentionParams& params, Tensor& out) {
  const char* op = "rope_attention_packed";
  if (!options_.fused) return Backend::rope_attention_packed(q, k, v, batch, theta, params, out);
  const PackedRope rope{rope_args(q, batch.positions, theta, op),
                        rope_args(k, batch.positions, theta, op)};
  record_attention_packed(q, k, v, batch, params, out, &rope, op);
}

bool CudaBackend::packed_flash_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, int64_t max_len) const {
  if (q.rank() != 3 || k.rank() != 3 || k.dim(1) == 0 || q.dim(1) % k.dim(1) != 0) return false;
  const int64_t hd = q.dim(2);
  // Of the tensor-core kernels, the flash kernel (pipelined, ldmatrix) where it applies: head_dim
  // 64 or 128, the windowed schedule, an 8-byte aligned out (its float2 stores).
  return packed_mma_applies(options_, q, k, v) && options_.packed_flash &&
         options_.flash_attention && !options_.packed_dense &&
         attention_flash_supports(ElemType::BF16, hd) &&
         reinterpret_cast<uintptr_t>(out.data()) % 8 == 0 &&
         (max_len + kMmaVectorsPerTile - 1) / kMmaVectorsPerTile <= 65535;  // grid.z
}

bool CudaBackend::packed_wgmma_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, int64_t max_len) const {
  const cudaDeviceProp& prop = ctx_->properties();
  return packed_flash_applies(q, k, v, out, max_len) && options_.packed_wgmma &&
         options_.flash_wgmma && options_.flash_fast_softmax &&
         attention_packed_wgmma_supports(q.dim(0), k.dim(1), q.dim(2), prop.major, prop.minor);
}

bool CudaBackend::packed_flash16_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& out, int64_t max_len) const {
  // The wgmma kernel or the flash kernel's plain tile (not the key halves, nor the interleaved
  // one), and the staging kernel's rows.
  return packed_flash_applies(q, k, v, out, max_len) && options_.rope_stage &&
         (packed_wgmma_applies(q, k, v, out, max_len) ||
          (!options_.packed_flash_halves &&
           !(options_.flash_fast_softmax && options_.flash_interleaved))) &&
         rope_stage16_applies(RopeStage16Args{nullptr, nullptr, nullptr, nullptr, nullptr, q.dim(0),
                                              q.dim(1), q.dim(2), 1.0f});
}

void CudaBackend::record_attention_packed(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Batch& batch, const AttentionParams& params,
                                          Tensor& out, const PackedRope* rope, const char* op,
                                          const PackedBf16* bf16) {
  for (const Tensor* t : {&q, &k, &v, static_cast<const Tensor*>(&out)}) expect_f32(*t, op);
  const BatchDesc& d = *batch.desc;
  const int64_t tokens = d.num_tokens();
  INFERA_CUDA_EXPECT(q.rank() == 3 && k.rank() == 3 && v.shape() == k.shape() &&
                         out.shape() == q.shape() && q.dim(0) == tokens && k.dim(0) == tokens &&
                         q.dim(2) == k.dim(2),
                     op, shapes(q, k) + " for " + std::to_string(tokens) + " tokens");
  const int64_t hq = q.dim(1), hkv = k.dim(1), hd = q.dim(2);
  INFERA_CUDA_EXPECT(hkv > 0 && hq % hkv == 0, op, "q heads must be a multiple of the kv heads");
  INFERA_CUDA_EXPECT(hq / hkv <= 32, op, "more than 32 q heads per kv head");
  INFERA_CUDA_EXPECT(
      hd <= kPackedMaxHeadDim, op,
      "head_dim " + std::to_string(hd) + " over " + std::to_string(kPackedMaxHeadDim));
  INFERA_CUDA_EXPECT(params.scale > 0, op, "scale must be positive");
  INFERA_CUDA_EXPECT(!batch.query_start.empty(), op, "the batch has no query_start");
  const UploadedBatch& u = find_batch(batch.query_start, kQueryStart, op);
  INFERA_CUDA_EXPECT(u.desc == &d && u.min[kQueryStart] >= 0 && u.max[kQueryStart] <= tokens, op,
                     "query_start outside the batch's rows");
  const int64_t seqs = d.num_seqs();
  INFERA_CUDA_EXPECT(seqs > 0 && seqs <= 65535 && hkv <= 65535, op,
                     "1 to 65535 sequences and kv heads");
  const int64_t group = hq / hkv;
  const bool mma = packed_mma_applies(options_, q, k, v);
  int64_t max_len = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t len =
        d.query_start[static_cast<size_t>(s + 1)] - d.query_start[static_cast<size_t>(s)];
    INFERA_CUDA_EXPECT(len >= 0, op, "query_start must not decrease");
    max_len = std::max(max_len, len);
  }
  const bool flash = packed_flash_applies(q, k, v, out, max_len);
  const bool wgmma = flash && packed_wgmma_applies(q, k, v, out, max_len);
  static_assert(kMmaVectorsPerTile == kPackedMmaRows, "both tensor-core kernels: 64-row tiles");
  // The wgmma kernel's query tiles as for paged prefill (cuda_ops.cpp): 128 rows (a warpgroup
  // each 64) where those fill every SM's 2 block slots, else 64 (the 2 warpgroups split each key
  // tile); CudaOptions::flash_wgmma_vectors forces one. (MHA: a vector is a row.)
  int64_t qt = mma ? kPackedMmaRows : 32 / group;
  if (wgmma) {
    const int64_t forced = options_.flash_wgmma_vectors;
    const int64_t big = (max_len + kFlashWgmmaVectors - 1) / kFlashWgmmaVectors;
    qt = forced == kFlashWgmmaSmallVectors || forced == kFlashWgmmaVectors ? forced
         : big * seqs * hkv < 2 * int64_t{ctx_->properties().multiProcessorCount}
             ? kFlashWgmmaSmallVectors
             : kFlashWgmmaVectors;
  }
  const int64_t kt = mma ? kPackedMmaKeys : kPackedKeys;
  // The schedule, counted here: per sequence and query tile, the key tiles overlapping the union
  // of its rows' windows (and, causally, up to its last row); the dense schedule: every key tile.
  const bool dense = options_.packed_dense;
  int64_t tiles = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t len =
        d.query_start[static_cast<size_t>(s + 1)] - d.query_start[static_cast<size_t>(s)];
    for (int64_t q0 = 0; q0 < len; q0 += qt) {
      const int64_t last = std::min(len, q0 + qt) - 1;
      const int64_t lo = dense || params.window < 0 ? 0 : std::max<int64_t>(0, q0 - params.window);
      int64_t hi = dense || params.window < 0 ? len : std::min(len, last + params.window + 1);
      if (params.causal && !dense) hi = std::min(hi, last + 1);
      tiles += (hi + kt - 1) / kt - lo / kt;
    }
  }
  if (bf16 && (!rope || !packed_flash16_applies(q, k, v, out, max_len)))
    throw std::logic_error(std::string(op) + ": bf16 hand-offs where the flash kernel's plain tile does not run");
  stats_.packed_key_tiles += tiles * hkv;
  stats_.packed_query_tile = qt;
  stats_.packed_key_tile = kt;
  const auto smem_limit = static_cast<int64_t>(ctx_->properties().sharedMemPerBlockOptin);
  const int64_t smem = mma ? packed_attention_mma_smem_bytes(hd) : packed_attention_smem_bytes(hd);
  INFERA_CUDA_EXPECT(
      smem <= smem_limit, op,
      "head_dim " + std::to_string(hd) + " needs more shared memory than the GPU has");
  PackedAttentionArgs a{};
  a.q = q.data_as<const float>();
  a.k = k.data_as<const float>();
  a.v = v.data_as<const float>();
  a.out = out.data_as<float>();
  a.query_start = batch.query_start.data_as<const int32_t>();
  a.num_seqs = seqs;
  a.tiles = std::max<int64_t>(1, (max_len + qt - 1) / qt);
  a.query_tile = qt;
  a.hq = hq;
  a.hkv = hkv;
  a.head_dim = hd;
  a.scale = params.scale;
  a.causal = params.causal ? 1 : 0;
  a.window = params.window;
  a.dense = dense ? 1 : 0;
  // The flash kernel reads k and v rounded to bf16: rope_attention_packed's staging writes them
  // as it rotates q and k (one launch instead of four).
  const size_t kv_bytes = static_cast<size_t>(k.numel()) * 2;
  void* kb = bf16 ? bf16->k16 : flash ? ctx_->scratch(DeviceContext::kEncoderKeysBf16, kv_bytes) : nullptr;
  void* vb = bf16 ? const_cast<void*>(bf16->v16)
             : flash ? ctx_->scratch(DeviceContext::kEncoderValuesBf16, kv_bytes) : nullptr;
  // The encoder stack's RoPE inside the wgmma kernel (q16 and k16 then stay as the GEMM wrote
  // them); the pipelined loop and head_dim 128 keep the staging launch.
  const bool rope_inside = bf16 && wgmma && options_.packed_rope_inside &&
                           !(options_.flash_wgmma_pipeline && qt == kFlashWgmmaSmallVectors) &&
                           attention_packed_wgmma_rope_supports(hd) && positions_are_offsets(u);
  bool staged = false;
  if (rope_inside) {
    staged = true;
  } else if (bf16) {
    // The flash kernel's own query scale (base 2 where its softmax is), rounded as it stages q.
    const float q_scale =
        static_cast<float>(params.scale) * (options_.flash_fast_softmax ? 1.4426950408889634f : 1.0f);
    const RopeStage16Args st{bf16->q16,    bf16->k16, rope->q.positions, rope->q.cos,
                             rope->q.sin, tokens,    hq,                hd,
                             q_scale};
    ctx_->record(launch_rope_stage16, st, note(op, "rope_stage16", {&q, &k}));
    staged = true;
  } else if (rope) {
    INFERA_CUDA_EXPECT(
        rope->q.x == a.q && rope->k.x == a.k && rope->q.n == tokens && rope->k.n == tokens, op,
        "rope arguments of other tensors");
    const RopeStageArgs st{rope->q.x,   rope->k.x,   a.v,    kb, vb,  rope->q.positions,
                           rope->q.cos, rope->q.sin, tokens, hq, hkv, hd};
    staged = flash && options_.rope_stage && rope_stage_applies(st);
    if (staged) {
      ctx_->record(launch_rope_stage, st, note(op, "rope_stage", {&q, &k}));
    } else {
      ctx_->record(launch_rope, rope->q, note(op, "rope", {&q}));
      ctx_->record(launch_rope, rope->k, note(op, "rope", {&k}));
    }
  }
  if (flash) {
    // The decoder's flash kernel without a block table (attention_flash.cu): k and v rounded to
    // bf16 first (what the tensor-core kernel does as it stages them), its 64-row query tiles and
    // 64-key tiles aligned to the sequence's first row: the schedule counted above.
    if (!staged) {
      ctx_->record(launch_convert, ConvertArgs{a.k, kb, ElemType::BF16, k.numel()},
                   note(op, "convert_bf16", {&k}));
      ctx_->record(launch_convert, ConvertArgs{a.v, vb, ElemType::BF16, v.numel()},
                   note(op, "convert_bf16", {&v}));
    }
    AttentionArgs f{};
    f.q = a.q;
    f.out = a.out;
    f.keys = kb;
    f.values = vb;
    f.type = ElemType::BF16;
    f.query_start = a.query_start;
    f.num_tokens = tokens;
    f.num_seqs = seqs;
    f.hq = hq;
    f.hkv = hkv;
    f.head_dim = hd;
    f.tiles = a.tiles;
    f.vectors_per_tile = kMmaVectorsPerTile;
    f.splits = 1;
    f.scale = params.scale;
    f.causal = a.causal;
    f.window = a.window;
    f.fast_softmax = options_.flash_fast_softmax ? 1 : 0;
    f.interleaved = options_.flash_interleaved ? 1 : 0;
    f.out_bf16 = bf16 ? bf16->out16 : shadow_buffer(out);
    if (bf16) {
      f.q = nullptr;
      f.q16 = bf16->q16;
      f.out = nullptr;
    }
    if (wgmma) {  // the schedule counted above, with qt-row query tiles
      f.vectors_per_tile = qt;
      f.pipelined = options_.flash_wgmma_pipeline && qt == kFlashWgmmaSmallVectors ? 1 : 0;
      f.tune = kWgmmaQPrefetch;
      const PackedWgmmaArgs pw{f, rope_inside ? rope->q.cos : nullptr,
                               rope_inside ? rope->q.sin : nullptr};
      ctx_->record(launch_attention_packed_wgmma, pw,
                   note(op, rope_inside ? "attention_packed_wgmma_rope" : "attention_packed_wgmma",
                        {&q, &k}));
      ++packed_wgmma_;
      packed_rope_inside_ += rope_inside ? 1 : 0;
      if (!bf16) publish_shadow(out, f.out_bf16);
      return;
    }
    // The key-halves kernel (CudaOptions::packed_flash_halves) on the same tiles and schedule.
    const bool halves = options_.packed_flash_halves && options_.flash_fast_softmax;
    ctx_->record(halves ? launch_attention_flash_halves : launch_attention_flash, f,
                 note(op, halves ? "attention_flash_halves" : "attention_flash", {&q, &k}));
    if (!bf16) publish_shadow(out, f.out_bf16);
  } else if (mma) {
    a.out_bf16 = shadow_buffer(out);
    ctx_->record(launch_packed_attention_mma, a, note(op, "packed_attention_mma", {&q, &k}));
    publish_shadow(out, a.out_bf16);
  } else
    ctx_->record(launch_packed_attention, a, note(op, "packed_attention", {&q, &k}));
}

OpStats CudaBackend::op_stats() const { return stats_; }

void CudaBackend::reset_op_stats() { stats_.packed_key_tiles = 0; }

}  // namespace infera::cuda
