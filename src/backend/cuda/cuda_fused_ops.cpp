// The CUDA backend's fused ops (see ops/backend.h): the same checks as the one-op versions, one
// launch where the decode step used several. Shapes a fused kernel does not cover fall back to
// Backend's composition of the one-op kernels.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/glu_gemm.h"
#include "backend/cuda/op_checks.h"
#include "backend/cuda/residual_mlp.h"
#include "infera/error.h"

namespace infera::cuda {

void CudaBackend::add_rmsnorm(Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                              Tensor& out) {
  const char* op = "add_rmsnorm";
  if (!options_.fused) return Backend::add_rmsnorm(x, delta, weight, eps, out);
  expect_f32(x, op);
  expect_f32(delta, op);
  expect_f32(out, op);
  expect_float_on_device(weight, op);
  const int64_t dim = row_width(x), rows = row_count(x);
  INFERA_CUDA_EXPECT(
      delta.numel() == x.numel() && out.numel() == x.numel() && weight.numel() == dim, op,
      shapes(x, delta) + ", " + shapes(out, weight));
  INFERA_CUDA_EXPECT(out.data() != x.data() && out.data() != delta.data(), op,
                     "out must not alias x or delta");
  AddRmsNormArgs a{x.data_as<float>(),
                   delta.data_as<const float>(),
                   weight.data(),
                   out.data_as<float>(),
                   rows,
                   dim,
                   elem_type(weight.dtype()),
                   eps,
                   shadow_buffer(out),
                   decode_tune()};
  ctx_->record(launch_add_rmsnorm, a, note(op, "add_rmsnorm", {&x, &weight}));
  publish_shadow(out, a.out_bf16);
}

void CudaBackend::matmul_multi(const Tensor& x, std::span<const Tensor* const> ws,
                               std::span<Tensor* const> outs) {
  const char* op = "matmul";
  INFERA_CUDA_EXPECT(ws.size() == outs.size() && !ws.empty(), op, "one output per weight");
  // Block-quantized weights have their own kernel (matmul); the fused GEMV reads float rows.
  if (std::any_of(ws.begin(), ws.end(), [](const Tensor* w) { return is_block_quantized(*w); })) {
    for (size_t i = 0; i < ws.size(); ++i) matmul(x, *ws[i], *outs[i]);
    return;
  }
  expect_f32(x, op);
  if (record_stream(x, ws, outs, false, op)) return;
  const int64_t k = row_width(x), n = row_count(x);
  bool one_launch = options_.fused && n <= options_.gemv_max_rows &&
                    ws.size() <= static_cast<size_t>(kGemvMaxSegments);
  for (const Tensor* w : ws) one_launch = one_launch && w->dtype() == ws[0]->dtype();
  if (!one_launch) {
    if (record_skinny(x, ws, outs, 0, op)) return;
    // Several GEMMs: the shared input is converted for the tensor cores once.
    const void* converted = nullptr;
    for (size_t i = 0; i < ws.size(); ++i) {
      matmul_checks(x, *ws[i], *outs[i]);
      // k and v of q/k/v: the next weight has this one's shape (CudaOptions::paired_gemm).
      if (options_.paired_gemm && i + 1 < ws.size() && ws[i]->dtype() == DType::BF16 &&
          ws[i + 1]->shape() == ws[i]->shape() && n > options_.gemv_max_rows &&
          !options_.exact_f32) {
        matmul_checks(x, *ws[i + 1], *outs[i + 1]);
        const void* xb = bf16_input(x, n, k, converted);
        if (record_gemm_pair(xb, *ws[i], *ws[i + 1], outs[i]->data(), outs[i + 1]->data(),
                             ElemType::F32, n, k, note(op, "cublas_gemm_pair", {&x, ws[i]}))) {
          converted = xb;
          ++i;
          continue;
        }
        converted = xb;
      }
      converted = record_matmul(x, *ws[i], *outs[i], n, k, ws[i]->dim(0), converted);
    }
    return;
  }
  GemvArgs a{};
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor& w = *ws[i];
    Tensor& out = *outs[i];
    expect_f32(out, op);
    expect_float_on_device(w, op);
    INFERA_CUDA_EXPECT(w.rank() == 2 && w.dim(1) == k, op, shapes(x, w));
    INFERA_CUDA_EXPECT(row_width(out) == w.dim(0) && row_count(out) == n, op, shapes(out, w));
    a.w[i] = w.data();
    a.out[i] = out.data_as<float>();
    a.m[i] = w.dim(0);
  }
  a.x = x.data_as<const float>();
  a.segments = static_cast<int64_t>(ws.size());
  a.weight_type = elem_type(ws[0]->dtype());
  a.n = n;
  a.k = k;
  a.tune = decode_tune();
  ctx_->record(launch_gemv_multi, a, note(op, "gemv_multi", {&x, ws[0], outs[0]}));
}

void CudaBackend::matmul_swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                                Tensor& gate, Tensor& up) {
  const char* op = "matmul_swiglu";
  expect_f32(x, op);
  const int64_t k = row_width(x), n = row_count(x);
  if (is_block_quantized(w_gate) || is_block_quantized(w_up)) {
    matmul(x, w_gate, gate);
    matmul(x, w_up, up);
    return swiglu(gate, up, gate);
  }
  {
    const Tensor* ws[] = {&w_gate, &w_up};
    Tensor* outs[] = {&gate, &up};
    if (w_up.shape() == w_gate.shape() && record_stream(x, ws, outs, true, op)) return;
  }
  if (!options_.fused || n > options_.gemv_max_rows || w_gate.dtype() != w_up.dtype()) {
    matmul_checks(x, w_gate, gate);
    matmul_checks(x, w_up, up);
    const Tensor* ws[] = {&w_gate, &w_up};
    Tensor* outs[] = {&gate, &up};
    if (options_.fused && w_up.shape() == w_gate.shape() &&
        record_skinny(x, ws, outs, kSkinnySwiglu, op))
      return;
    if (glu_bf16_applies(w_gate, w_up, n)) {
      void* shadow = shadow_buffer(gate);
      record_glu_bf16(x, w_gate, w_up, gate, up, gate.data_as<float>(), shadow, op);
      return publish_shadow(gate, shadow);
    }
    const void* converted = record_matmul(x, w_gate, gate, n, k, w_gate.dim(0));
    record_matmul(x, w_up, up, n, k, w_up.dim(0), converted);
    return swiglu(gate, up, gate);
  }
  expect_f32(x, op);
  expect_f32(gate, op);
  expect_f32(up, op);
  expect_float_on_device(w_gate, op);
  expect_float_on_device(w_up, op);
  INFERA_CUDA_EXPECT(w_gate.rank() == 2 && w_gate.dim(1) == k && w_up.shape() == w_gate.shape(), op,
                     shapes(x, w_gate) + ", " + shapes(w_up, w_gate));
  const int64_t m = w_gate.dim(0);
  INFERA_CUDA_EXPECT(row_width(gate) == m && row_count(gate) == n && up.numel() == gate.numel(), op,
                     shapes(gate, w_gate) + ", " + shapes(up, w_up));
  GemvArgs a{};
  a.x = x.data_as<const float>();
  a.w[0] = w_gate.data();
  a.w[1] = w_up.data();
  a.out[0] = gate.data_as<float>();
  a.out[1] = up.data_as<float>();
  a.m[0] = a.m[1] = m;
  a.segments = 2;
  a.swiglu = 1;
  a.weight_type = elem_type(w_gate.dtype());
  a.n = n;
  a.k = k;
  a.tune = decode_tune();
  ctx_->record(launch_gemv_multi, a, note(op, "gemv_swiglu", {&x, &w_gate, &gate}));
}

bool CudaBackend::glu_bf16_applies(const Tensor& w_gate, const Tensor& w_up, int64_t n) const {
  return options_.glu_bf16_gemm && !options_.exact_f32 && w_gate.dtype() == DType::BF16 &&
         w_up.dtype() == DType::BF16 && w_up.shape() == w_gate.shape() &&
         n > options_.gemv_max_rows;
}

void CudaBackend::record_glu_bf16(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                                  const Tensor& gate, Tensor& up, float* out_f32, void* out_bf16,
                                  const char* op, bool geglu, const void* x_bf16) {
  // gate . x and up . x as bf16 in `up`'s f32 memory ([n, m] f32 holds [2, n, m] bf16).
  const int64_t k = row_width(x), n = row_count(x), m = w_gate.dim(0);
  auto* g16 = static_cast<uint16_t*>(up.data());
  const void* xb = bf16_input(x, n, k, x_bf16);
  if (record_glu_gemm(xb, n, k, w_gate, w_up, out_f32, out_bf16, geglu,
                      note(op, "glu_gemm", {&x, &w_gate})))
    return;
  // Paired (CudaOptions::paired_gemm): the two outputs in the weights' address order, so that
  // one forward stride reaches both.
  const bool up_first = options_.paired_gemm && w_up.data() < w_gate.data();
  uint16_t* gate16 = up_first ? g16 + n * m : g16;
  uint16_t* up16 = up_first ? g16 : g16 + n * m;
  if (!record_gemm_pair(xb, w_gate, w_up, gate16, up16, ElemType::BF16, n, k,
                        note(op, "cublas_gemm_pair_bf16", {&x, &w_gate}))) {
    record_gemm_bf16_out(xb, w_gate, gate16, n, k, m, note(op, "cublas_gemm_bf16", {&x, &w_gate}));
    record_gemm_bf16_out(xb, w_up, up16, n, k, m, note(op, "cublas_gemm_bf16", {&x, &w_up}));
  }
  ctx_->record(geglu ? launch_geglu_bf16 : launch_swiglu_bf16,
               SwigluBf16Args{gate16, up16, out_f32, n * m, out_bf16},
               note(op, geglu ? "geglu_bf16" : "swiglu_bf16", {&gate, &up}));
}

bool CudaBackend::record_glu_gemm(const void* x_bf16, int64_t n, int64_t k, const Tensor& w_gate,
                                  const Tensor& w_up, float* out_f32, void* out_bf16, bool geglu,
                                  const OpNote& nt) {
  if (!options_.glu_gemm || n < options_.glu_gemm_min_rows || w_gate.dtype() != DType::BF16 ||
      w_up.dtype() != DType::BF16 || w_up.shape() != w_gate.shape() || w_gate.rank() != 2 ||
      w_gate.dim(1) != k)
    return false;
  const cudaDeviceProp& prop = ctx_->properties();
  const GluGemmArgs a{x_bf16,
                      w_gate.data(),
                      w_up.data(),
                      out_bf16,
                      out_f32,
                      n,
                      k,
                      w_gate.dim(0),
                      k,
                      geglu ? kGluGemmGelu : kGluGemmSilu,
                      {options_.glu_gemm_tile_cols, int64_t{prop.multiProcessorCount},
                       options_.tma_gemm_pingpong ? 1 : 0}};
  if (glu_gemm_unsupported(a, prop.major, prop.minor)) return false;
  ctx_->record(launch_glu_gemm, a, nt);
  ++glu_gemms_;
  return true;
}

void CudaBackend::matmul_swiglu_down(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                                     const Tensor& w_down, Tensor& gate, Tensor& up, Tensor& out) {
  const char* op = "matmul_swiglu_down";
  const int64_t n = row_count(x);
  // Past the GEMV with bf16 weights (the GLU path of matmul_swiglu, not the skinny GEMM): the
  // SwiGLU kernel writes its result only as bf16, into `gate`'s memory (scratch here), and the
  // down projection's GEMM reads that: the f32 result, which nothing else reads, is never written.
  // With the stream GEMM on for these rows: matmul_swiglu (its SwiGLU epilogue writes the bf16
  // shadow the down projection reads) and matmul.
  if (!options_.mlp_bf16_only || !options_.fused || options_.skinny_gemm || stream_gemm_rows(n) ||
      is_block_quantized(w_gate) || is_block_quantized(w_up) || w_down.dtype() != DType::BF16 ||
      !glu_bf16_applies(w_gate, w_up, n))
    return Backend::matmul_swiglu_down(x, w_gate, w_up, w_down, gate, up, out);
  expect_f32(x, op);
  matmul_checks(x, w_gate, gate);
  matmul_checks(x, w_up, up);
  matmul_checks(gate, w_down, out);
  void* result16 = gate.data();  // [n, f] bf16 in [n, f] f32 memory
  record_glu_bf16(x, w_gate, w_up, gate, up, nullptr, result16, op);
  record_matmul(gate, w_down, out, n, row_width(gate), w_down.dim(0), result16);
}

void CudaBackend::qk_norm_rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm,
                                        const Tensor& k_norm, float eps, double theta,
                                        KvLayer& cache, const Batch& batch) {
  const char* op = "qk_norm_rope_kv_write";
  if (!options_.fused || q_norm.dtype() != k_norm.dtype())
    return Backend::qk_norm_rope_kv_write(q, k, v, q_norm, k_norm, eps, theta, cache, batch);
  const QkNormRopeKvArgs a = qk_norm_rope_kv_args(q, k, v, q_norm, k_norm, eps, theta, cache, batch);
  if (options_.fuse_qk_attention && a.norm_type == ElemType::BF16 &&
      (a.head_dim == 64 || a.head_dim == 128) && a.cache_type != ElemType::F32) {
    record_pending_qk();  // an earlier one that found no attention
    pending_qk_ = a;
    pending_qk_note_ = note(op, "qk_norm_rope_kv", {&q, &k, &cache.keys});
    return;
  }
  ctx_->record(launch_qk_norm_rope_kv, a, note(op, "qk_norm_rope_kv", {&q, &k, &cache.keys}));
}

QkNormRopeKvArgs CudaBackend::qk_norm_rope_kv_args(Tensor& q, Tensor& k, const Tensor& v,
                                                   const Tensor& q_norm, const Tensor& k_norm,
                                                   float eps, double theta, KvLayer& cache,
                                                   const Batch& batch) {
  const char* op = "qk_norm_rope_kv_write";
  expect_f32(q, op);
  expect_f32(k, op);
  expect_f32(v, op);
  expect_float_on_device(q_norm, op);
  expect_float_on_device(k_norm, op);
  INFERA_CUDA_EXPECT(q.rank() == 3 && k.rank() == 3 && v.shape() == k.shape() &&
                         q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2) &&
                         q.dim(0) == batch.num_tokens(),
                     op, shapes(q, k) + ", " + shapes(k, v));
  const int64_t n = q.dim(0), d = q.dim(2);
  INFERA_CUDA_EXPECT(d > 0 && d % 2 == 0, op, "head_dim " + std::to_string(d) + " must be even");
  INFERA_CUDA_EXPECT(n * (q.dim(1) + 2 * k.dim(1)) < (int64_t{1} << 31), op,
                     "more than 2^31 (token, head) pairs: " + shapes(q, k));
  INFERA_CUDA_EXPECT(q_norm.numel() == d && k_norm.numel() == d, op, shapes(q_norm, k_norm));
  expect_pool(cache, k.dim(1), d, op);
  const UploadedBatch& u = find_batch(batch.positions, kPositions, op);
  INFERA_CUDA_EXPECT(batch.positions.numel() == n, op, "positions for q " + q.shape().str());
  INFERA_CUDA_EXPECT(u.min[kPositions] >= 0, op,
                     "negative position " + std::to_string(u.min[kPositions]));
  INFERA_CUDA_EXPECT(!batch.slots.empty(), op, "the batch has no slots");
  const UploadedBatch& us = find_batch(batch.slots, kSlots, op);
  INFERA_CUDA_EXPECT(batch.slots.numel() == n, op, "slots must be I32 [" + std::to_string(n) + "]");
  const int64_t capacity = cache.keys.dim(1) * cache.keys.dim(2);
  INFERA_CUDA_EXPECT(us.min[kSlots] >= 0 && us.max[kSlots] < capacity, op,
                     "slot " +
                         std::to_string(us.min[kSlots] < 0 ? us.min[kSlots] : us.max[kSlots]) +
                         " outside the cache's " + std::to_string(capacity));
  const RopeTable& table = rope_table(theta, d, u.max[kPositions]);
  QkNormRopeKvArgs a{};
  a.q = q.data_as<float>();
  a.k = k.data_as<float>();
  a.v = v.data_as<const float>();
  a.q_norm = q_norm.data();
  a.k_norm = k_norm.data();
  a.norm_type = elem_type(q_norm.dtype());
  a.positions = batch.positions.data_as<const int32_t>();
  a.cos = table.cos.data_as<const float>();
  a.sin = table.sin.data_as<const float>();
  a.slots = batch.slots.data_as<const int32_t>();
  a.key_pool = cache.keys.data();
  a.value_pool = cache.values.data();
  a.cache_type = elem_type(cache.keys.dtype());
  a.n = n;
  a.hq = q.dim(1);
  a.hkv = k.dim(1);
  a.head_dim = d;
  a.block_size = cache.keys.dim(2);
  a.num_blocks = cache.keys.dim(1);
  a.eps = eps;
  a.by_token = options_.qk_norm_by_token ? 1 : 0;
  a.tune = decode_tune();
  return a;
}

void CudaBackend::record_pending_qk() {
  if (!pending_qk_) return;
  const QkNormRopeKvArgs a = *pending_qk_;
  pending_qk_.reset();
  ctx_->record(launch_qk_norm_rope_kv, a, pending_qk_note_);
}

void CudaBackend::argmax_rows(const Tensor& x, std::span<int32_t> ids) {
  const char* op = "argmax_rows";
  expect_f32(x, op);
  INFERA_CUDA_EXPECT(x.rank() == 2 && static_cast<int64_t>(ids.size()) == x.dim(0) && x.dim(1) > 0,
                     op, "x " + x.shape().str() + " for " + std::to_string(ids.size()) + " ids");
  INFERA_CUDA_EXPECT(x.dim(1) <= (int64_t{1} << 31) - 1 && x.dim(0) <= 65535, op,
                     "at most 65535 rows narrower than 2^31");
  auto* dev =
      static_cast<unsigned long long*>(ctx_->scratch(DeviceContext::kArgmaxKeys, ids.size() * 8));
  ctx_->record(launch_argmax_rows, ArgmaxArgs{x.data_as<const float>(), dev, x.dim(0), x.dim(1)},
               note(op, "argmax_rows", {&x}));
  ctx_->flush();
  keys_.resize(ids.size());
  check_cuda(
      cudaMemcpyAsync(keys_.data(), dev, ids.size() * 8, cudaMemcpyDeviceToHost, ctx_->stream()),
      "copy " + std::to_string(ids.size()) + " argmax keys to the host");
  check_cuda(cudaStreamSynchronize(ctx_->stream()),
             "run the step that produced " + x.name() + " " + x.shape().str());
  // The key's low word is 0xffffffff - index; 0 means no value above -inf.
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = keys_[i] == 0 ? -1 : static_cast<int32_t>(0xffffffffu - (keys_[i] & 0xffffffffu));
}

void CudaBackend::residual_mlp(Tensor& x, const Tensor& delta, const Tensor& mlp_norm,
                               const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                               const Tensor& next_norm, float eps, Tensor& xn, Tensor& gate,
                               Tensor& up, Tensor& proj) {
  const char* op = "residual_mlp";
  auto composed = [&] {
    Backend::residual_mlp(x, delta, mlp_norm, w_gate, w_up, w_down, next_norm, eps, xn, gate, up,
                          proj);
  };
  // The one-kernel path: one f32 row, bf16 weights of the MLP's shapes, float norms of one type,
  // widths in 16-byte rows, every operand on this device. Anything else: the composition.
  const int64_t d = row_width(x), f = w_gate.rank() == 2 ? w_gate.dim(0) : 0;
  const bool bf16_weights =
      w_gate.dtype() == DType::BF16 && w_up.dtype() == DType::BF16 && w_down.dtype() == DType::BF16;
  if (!options_.fused || !options_.residual_mlp || !bf16_weights || row_count(x) != 1 ||
      x.dtype() != DType::F32 || delta.dtype() != DType::F32 || xn.dtype() != DType::F32 ||
      gate.dtype() != DType::F32 || d % 8 != 0 || f % 8 != 0 || f == 0 ||
      (!next_norm.empty() && next_norm.dtype() != mlp_norm.dtype()))
    return composed();
  const auto aligned = [](const Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.data()) % 16 == 0;
  };
  if (!aligned(w_gate) || !aligned(w_up) || !aligned(w_down)) return composed();
  expect_float_on_device(mlp_norm, op);
  expect_float_on_device(w_gate, op);
  expect_float_on_device(w_up, op);
  expect_float_on_device(w_down, op);
  if (!next_norm.empty()) expect_float_on_device(next_norm, op);
  INFERA_CUDA_EXPECT(delta.numel() == d && xn.numel() == d && mlp_norm.numel() == d &&
                         (next_norm.empty() || next_norm.numel() == d),
                     op, shapes(x, delta) + ", " + shapes(xn, mlp_norm));
  INFERA_CUDA_EXPECT(w_gate.dim(1) == d && w_up.shape() == w_gate.shape() && w_down.rank() == 2 &&
                         w_down.dim(0) == d && w_down.dim(1) == f,
                     op, shapes(w_gate, w_up) + ", " + shapes(w_down, x));
  INFERA_CUDA_EXPECT(gate.numel() == f, op, shapes(gate, w_gate));
  INFERA_CUDA_EXPECT(xn.data() != x.data() && xn.data() != delta.data(), op,
                     "xn must not alias x or delta");
  // One block per SM (or the test's count), each with ceil(f / blocks) gate/up outputs and
  // ceil(d / blocks) down rows in shared memory; all must be resident at once (grid barrier).
  const int64_t sms = ctx_->properties().multiProcessorCount;
  const int64_t blocks = options_.residual_mlp_blocks > 0 ? options_.residual_mlp_blocks : sms;
  if (blocks <= 0) return composed();
  const int64_t gate_rows = (f + blocks - 1) / blocks, down_rows = (d + blocks - 1) / blocks;
  const int64_t smem = cuda::residual_mlp_smem_bytes(d, f, gate_rows, down_rows);
  const ElemType norm_type = elem_type(mlp_norm.dtype());
  // Co-resident blocks of this size (asked once per size: it also sets the kernel's attribute).
  const int64_t threads = options_.residual_mlp_threads == 512 ? 512 : 256;
  const std::pair<int64_t, int64_t> key{smem, static_cast<int64_t>(norm_type) + 16 * threads};
  auto fit = residual_mlp_fit_.find(key);
  if (fit == residual_mlp_fit_.end())
    fit = residual_mlp_fit_.emplace(key, cuda::residual_mlp_max_blocks(smem, threads, norm_type))
              .first;
  if (blocks > fit->second) return composed();
  ResidualMlpArgs a{
      x.data_as<float>(),
      delta.data_as<const float>(),
      mlp_norm.data(),
      w_gate.data(),
      w_up.data(),
      w_down.data(),
      next_norm.empty() ? nullptr : next_norm.data(),
      xn.data_as<float>(),
      gate.data_as<float>(),
      static_cast<unsigned*>(ctx_->zeroed_scratch(DeviceContext::kResidualMlpSync, 64)),
      d,
      f,
      blocks,
      gate_rows,
      down_rows,
      options_.residual_mlp_chunk,
      options_.residual_mlp_lsu ? 1 : 0,
      threads,
      norm_type,
      eps};
  ctx_->record(launch_residual_mlp, a, note(op, "residual_mlp", {&x, &w_gate, &w_down}));
  ++residual_mlp_kernels_;
  publish_shadow(xn, nullptr);
}

}  // namespace infera::cuda
