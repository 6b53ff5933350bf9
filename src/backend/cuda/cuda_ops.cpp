// The ops of the CUDA backend: each checks its operands on the host (shapes, devices, and its
// indices against the extremes computed when the batch was uploaded), chooses a kernel and
// records its launch; DeviceContext issues the launches (see device_context.h).
#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/attention_decode_mma.h"
#include "backend/cuda/attention_flash_wgmma.h"
#include "backend/cuda/attention_tma_schedule.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_checks.h"
#include "backend/cuda/residual_gemm.h"
#include "infera/error.h"

namespace infera::cuda {
namespace {

// cuBLAS GEMM, out[n, m] = x[n, k] . w[m, k]^T in cuBLAS's column-major terms:
// out^T (m x n) = w (k x m, transposed) . x^T (k x n); f32 accumulation and output.
struct CublasGemmArgs {
  cublasHandle_t handle;
  const void* w;
  const void* x;  // bf16 (converted) or f32, matching w
  void* out;
  ElemType type;
  int64_t n, k, m;
  ElemType out_type = ElemType::F32;  // BF16: matmul_swiglu's prefill GEMMs (bf16 weights only)
  // batch 2: a second GEMM at w + stride_w, out + stride_out (elements), same x (paired_gemm).
  int64_t batch = 1, stride_w = 0, stride_out = 0;
  // 1: out += x . w^T (beta 1: the residual add in the GEMM's epilogue, f32 out; the decoder stack's
  // prefill path): the same f32 sum as the product written and then added.
  int64_t accumulate = 0;
};
static_assert(sizeof(cublasHandle_t) == 8);

void launch_cublas_gemm(const void* p, cudaStream_t) {
  const auto& a = *static_cast<const CublasGemmArgs*>(p);
  const float alpha = 1.0f, beta = a.accumulate ? 1.0f : 0.0f;
  const cudaDataType_t t = a.type == ElemType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  const auto m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
  const cudaDataType_t ot = a.out_type == ElemType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  if (a.batch > 1) {
    check_cublas(cublasGemmStridedBatchedEx(a.handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha,
                                            a.w, t, k, a.stride_w, a.x, t, k, 0, &beta, a.out, ot,
                                            m, a.stride_out, static_cast<int>(a.batch),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
    return;
  }
  check_cublas(
      cublasGemmEx(a.handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a.w, t, k, a.x, t, k, &beta,
                   a.out, a.out_type == ElemType::BF16 ? CUDA_R_16BF : CUDA_R_32F, m,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

// The same GEMM through a cuBLASLt plan (gemm_plans.h); n, k, m and the type are kept in the
// record so that the step's key names the shape whatever the plan's address.
struct CublasLtGemmArgs {
  cublasLtHandle_t handle;
  const GemmPlan* plan;
  const void* w;
  const void* x;
  float* out;
  void* workspace;
  ElemType type;
  int64_t n, k, m;
};

void launch_cublaslt_gemm(const void* p, cudaStream_t stream) {
  const auto& a = *static_cast<const CublasLtGemmArgs*>(p);
  check_cublas(run_gemm_plan(a.handle, *a.plan, a.w, a.x, a.out, a.workspace, stream),
               "cublasLtMatmul");
}

// The ctx_->scratch slot of the bf16 shadows (0-4 are taken). One slot for all of them: the
// kernels run in stream order, and a producer that may start early (PDL) writes only after
// pdl_wait(), so a shadow is never overwritten while the GEMM that reads it runs. (Alternating
// slots would make a step's launch bytes depend on the parity of the shadows before it, and
// repeated prefill steps would stop replaying as graphs.)
constexpr int kShadowSlot = DeviceContext::kBf16Shadow;

}  // namespace

void* CudaBackend::shadow_buffer(const Tensor& out) {
  if (!options_.bf16_shadow || options_.exact_f32 || out.rank() < 1 ||
      out.dim(0) <= options_.gemv_max_rows)
    return nullptr;
  return ctx_->scratch(kShadowSlot, static_cast<size_t>(out.numel()) * 2);
}

void CudaBackend::publish_shadow(const Tensor& out, const void* bf16) {
  shadow_ =
      bf16 ? Bf16Shadow{out.data(), out.numel(), bf16, ctx_->records_appended()} : Bf16Shadow{};
}

const void* CudaBackend::take_shadow(const Tensor& x, int64_t numel) {
  const bool fresh = shadow_.bf16 && shadow_.f32 == x.data() && shadow_.numel == numel &&
                     x.numel() == numel && shadow_.record == ctx_->records_appended();
  if (!fresh) return nullptr;
  ++shadow_uses_;
  return shadow_.bf16;
}

void CudaBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  const char* op = "embedding";
  expect_f32(out, op);
  expect_float_on_device(table, op);
  INFERA_CUDA_EXPECT(table.rank() == 2 && out.rank() == 2 && out.dim(1) == table.dim(1), op,
                     shapes(table, out));
  int field = kTokens;
  const UploadedBatch& b = find_batch(ids, -1, op, &field);
  INFERA_CUDA_EXPECT(ids.numel() == out.dim(0), op,
                     "ids [" + std::to_string(ids.numel()) + "] for out " + out.shape().str());
  INFERA_CUDA_EXPECT(b.min[field] >= 0 && b.max[field] < table.dim(0), op,
                     "token id " + std::to_string(b.min[field] < 0 ? b.min[field] : b.max[field]) +
                         " outside the vocabulary [0, " + std::to_string(table.dim(0)) + ")");
  EmbeddingArgs a{table.data(), ids.data_as<const int32_t>(), out.data_as<float>(), out.dim(0),
                  table.dim(1), elem_type(table.dtype())};
  ctx_->record(launch_embedding, a, note(op, "embedding", {&table, &ids, &out}));
}

void CudaBackend::rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  const char* op = "rmsnorm";
  expect_f32(x, op);
  expect_f32(out, op);
  expect_float_on_device(weight, op);
  const int64_t dim = row_width(x), rows = row_count(x);
  INFERA_CUDA_EXPECT(weight.numel() == dim && out.numel() == x.numel(), op, shapes(x, weight));
  RmsNormArgs a{x.data_as<const float>(),
                weight.data(),
                out.data_as<float>(),
                rows,
                dim,
                elem_type(weight.dtype()),
                eps};
  ctx_->record(launch_rmsnorm, a, note(op, "rmsnorm", {&x, &weight}));
}

void CudaBackend::matmul_checks(const Tensor& x, const Tensor& w, const Tensor& out) const {
  const char* op = "matmul";
  expect_f32(x, op);
  expect_f32(out, op);
  expect_float_on_device(w, op);
  const int64_t k = row_width(x), n = row_count(x);
  INFERA_CUDA_EXPECT(w.rank() == 2 && w.dim(1) == k, op, shapes(x, w));
  const int64_t m = w.dim(0);
  INFERA_CUDA_EXPECT(row_width(out) == m && row_count(out) == n, op, shapes(out, w));
  INFERA_CUDA_EXPECT(n < (int64_t{1} << 31) && m < (int64_t{1} << 31) && k < (int64_t{1} << 31), op,
                     "dimensions beyond 2^31: " + shapes(x, w));
}

void CudaBackend::matmul(const Tensor& x, const Tensor& w, Tensor& out) {
  if (is_block_quantized(w)) {
    const char* op = "matmul";
    expect_f32(x, op);
    expect_f32(out, op);
    INFERA_CUDA_EXPECT(w.device() == Device::CUDA, op,
                       "weight " + w.name() + " is not in device memory");
    const int64_t k = row_width(x), n = row_count(x);
    INFERA_CUDA_EXPECT(w.rank() == 2 && w.dim(1) == k && k % 32 == 0, op,
                       shapes(x, w) + " (quantized rows: whole blocks of 32)");
    const int64_t m = w.dim(0);
    INFERA_CUDA_EXPECT(row_width(out) == m && row_count(out) == n, op, shapes(out, w));
    INFERA_CUDA_EXPECT(n < (int64_t{1} << 31) && m < (int64_t{1} << 31), op,
                       "dimensions beyond 2^31");
    OpNote nt = note(op, "quant_matmul", {&x, &w, &out});
    ctx_->record(launch_quant_matmul,
                 QuantMatmulArgs{x.data_as<const float>(), w.data(), out.data_as<float>(), n, k, m,
                                 w.dtype() == DType::Q4_0 ? 1 : 0},
                 nt);
    return;
  }
  matmul_checks(x, w, out);
  const Tensor* ws[] = {&w};
  Tensor* outs[] = {&out};
  if (record_stream(x, ws, outs, false, "matmul")) return;
  if (record_skinny(x, ws, outs, 0, "matmul")) return;
  record_matmul(x, w, out, row_count(x), row_width(x), w.dim(0));
}

const void* CudaBackend::record_matmul(const Tensor& x, const Tensor& w, Tensor& out, int64_t n,
                                       int64_t k, int64_t m, const void* converted) {
  OpNote nt = note("matmul", "", {&x, &w, &out});
  MatmulArgs a{
      x.data_as<const float>(), w.data(), out.data_as<float>(), elem_type(w.dtype()), n, k, m};
  if (n <= options_.gemv_max_rows) {
    nt.kernel = "gemv";
    a.tune = decode_tune();
    ctx_->record(launch_gemv, a, nt);
    return nullptr;
  }
  // f16 weights stay on the f32 CUDA-core GEMM: converting activations to f16 could overflow.
  if (options_.exact_f32 || w.dtype() == DType::F16) {
    nt.kernel = "gemm_simt";
    ctx_->record(launch_gemm_simt, a, nt);
    return nullptr;
  }
  const void* xin = x.data();
  if (w.dtype() == DType::BF16) xin = converted = bf16_input(x, n, k, converted);
  if (options_.cublaslt_plans) {
    const cudaDataType_t t = w.dtype() == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
    GemmPlans& plans = ctx_->gemm_plans();
    if (const GemmPlan* plan = plans.get(t, n, k, m, w.data(), xin, out.data())) {
      nt.kernel = "cublaslt_gemm";
      ctx_->record(launch_cublaslt_gemm,
                   CublasLtGemmArgs{plans.handle(), plan, w.data(), xin, out.data_as<float>(),
                                    plans.workspace(), elem_type(w.dtype()), n, k, m},
                   nt);
      return w.dtype() == DType::BF16 ? xin : nullptr;
    }
  }
  nt.kernel = "cublas_gemm";
  ctx_->record(launch_cublas_gemm,
               CublasGemmArgs{ctx_->cublas(), w.data(), xin, out.data_as<float>(),
                              elem_type(w.dtype()), n, k, m},
               nt);
  return w.dtype() == DType::BF16 ? xin : nullptr;
}

const void* CudaBackend::bf16_input(const Tensor& x, int64_t n, int64_t k, const void* converted,
                                    const OpNote* as) {
  // x rounded to bf16 once for every weight that shares it (matmul_multi, matmul_swiglu), or by
  // the kernel that made x (a bf16 shadow).
  if (!converted) converted = take_shadow(x, n * k);
  if (converted) return converted;
  void* xb = ctx_->scratch(DeviceContext::kGemmInputBf16, static_cast<size_t>(n * k) * 2);
  OpNote cn = as ? *as : note("matmul", "convert_bf16", {&x});
  cn.kernel = "convert_bf16";
  ctx_->record(launch_convert, ConvertArgs{x.data_as<const float>(), xb, ElemType::BF16, n * k},
               cn);
  return xb;
}

bool CudaBackend::record_gemm_pair(const void* x_bf16, const Tensor& w0, const Tensor& w1,
                                   void* out0, void* out1, ElemType out_type, int64_t n, int64_t k,
                                   const OpNote& nt) {
  if (!options_.paired_gemm || options_.exact_f32 || w0.dtype() != DType::BF16 ||
      w1.dtype() != DType::BF16 || w0.shape() != w1.shape() || n <= options_.gemv_max_rows)
    return false;
  // One strided-batched launch: w1 = w0 + stride_w and out1 = out0 + stride_out, both forward
  // (the order of the pair is free: each GEMM is computed alone) and 16-byte multiples, so that
  // cuBLAS keeps its aligned tensor-core kernels.
  const size_t out_elem = out_type == ElemType::BF16 ? 2 : 4;
  auto diff = [](const void* a, const void* b) {
    return reinterpret_cast<intptr_t>(b) - reinterpret_cast<intptr_t>(a);
  };
  intptr_t dw = diff(w0.data(), w1.data()), dout = diff(out0, out1);
  const void* w = w0.data();
  void* out = out0;
  if (dw < 0) {
    dw = -dw;
    dout = -dout;
    w = w1.data();
    out = out1;
  }
  if (dw == 0 || dout <= 0 || dw % 16 != 0 || dout % 16 != 0) return false;
  const int64_t m = w0.dim(0);
  ctx_->record(launch_cublas_gemm,
               CublasGemmArgs{ctx_->cublas(), w, x_bf16, out, ElemType::BF16, n, k, m, out_type, 2,
                              static_cast<int64_t>(dw / 2),
                              static_cast<int64_t>(dout / static_cast<intptr_t>(out_elem))},
               nt);
  ++paired_gemms_;
  return true;
}

void CudaBackend::record_gemm_strided_bf16(const void* x_bf16, const void* w, void* out_bf16,
                                           int64_t n, int64_t k, int64_t m, int64_t count,
                                           int64_t stride_w, int64_t stride_out,
                                           const OpNote& nt) {
  ctx_->record(launch_cublas_gemm,
               CublasGemmArgs{ctx_->cublas(), w, x_bf16, out_bf16, ElemType::BF16, n, k, m,
                              ElemType::BF16, count, stride_w, stride_out},
               nt);
}

void CudaBackend::record_gemm_bf16_out(const void* x_bf16, const Tensor& w, void* out_bf16,
                                       int64_t n, int64_t k, int64_t m, const OpNote& nt) {
  ctx_->record(launch_cublas_gemm,
               CublasGemmArgs{ctx_->cublas(), w.data(), x_bf16, out_bf16, ElemType::BF16, n, k, m,
                              ElemType::BF16},
               nt);
}

void CudaBackend::record_gemm_bf16_in(const void* x_bf16, const Tensor& w, void* out,
                                      ElemType out_type, bool accumulate, int64_t n, int64_t k,
                                      const OpNote& nt) {
  // x += . W^T on the TMA GEMM of our own (CudaOptions::residual_gemm).
  if (accumulate && out_type == ElemType::F32 && options_.residual_gemm &&
      n >= options_.residual_gemm_min_rows && w.dtype() == DType::BF16) {
    const cudaDeviceProp& prop = ctx_->properties();
    const ResidualGemmArgs r{x_bf16,
                             w.data(),
                             static_cast<float*>(out),
                             n,
                             k,
                             w.dim(0),
                             {options_.residual_gemm_tile_cols, int64_t{prop.multiProcessorCount},
                              options_.tma_gemm_pingpong ? 1 : 0}};
    if (!residual_gemm_unsupported(r, prop.major, prop.minor)) {
      OpNote rn = nt;
      rn.kernel = "residual_gemm";
      ctx_->record(launch_residual_gemm, r, rn);
      ++residual_gemms_;
      return;
    }
  }
  CublasGemmArgs a{ctx_->cublas(), w.data(), x_bf16, out, ElemType::BF16, n, k, w.dim(0), out_type};
  a.accumulate = accumulate ? 1 : 0;
  ctx_->record(launch_cublas_gemm, a, nt);
}

void CudaBackend::rope(Tensor& x, const Tensor& positions, double theta) {
  const char* op = "rope";
  const RopeArgs a = rope_args(x, positions, theta, op);
  ctx_->record(launch_rope, a, note(op, "rope", {&x, &positions}));
}

RopeArgs CudaBackend::rope_args(Tensor& x, const Tensor& positions, double theta, const char* op) {
  expect_f32(x, op);
  INFERA_CUDA_EXPECT(x.rank() == 3 && x.dim(2) % 2 == 0 && x.dim(2) > 0, op,
                     "x " + x.shape().str());
  const UploadedBatch& b = find_batch(positions, kPositions, op);
  INFERA_CUDA_EXPECT(
      positions.numel() == x.dim(0), op,
      "positions [" + std::to_string(positions.numel()) + "] for x " + x.shape().str());
  INFERA_CUDA_EXPECT(b.min[kPositions] >= 0, op,
                     "negative position " + std::to_string(b.min[kPositions]));
  const RopeTable& table = rope_table(theta, x.dim(2), b.max[kPositions]);
  return RopeArgs{x.data_as<float>(),
                  positions.data_as<const int32_t>(),
                  table.cos.data_as<const float>(),
                  table.sin.data_as<const float>(),
                  x.dim(0),
                  x.dim(1),
                  x.dim(2)};
}

// The batch's block ids (for this pool's block size) must lie inside the pool.
void expect_tables_fit(const UploadedBatch& u, const KvLayer& cache, const char* op) {
  const int64_t blocks = cache.keys.dim(1), bs = cache.keys.dim(2);
  const BatchDesc& d = *u.desc;
  if (u.checked_block_size != bs) {
    u.block_min = 0;
    u.block_max = -1;
    u.tables_fit = true;
    bool any = false;
    for (int64_t s = 0; s < d.num_seqs(); ++s) {
      const int64_t used = (d.seq_lens[static_cast<size_t>(s)] + bs - 1) / bs;
      if (used > d.max_blocks ||
          static_cast<int64_t>(d.block_table.size()) < (s + 1) * int64_t{d.max_blocks}) {
        u.tables_fit = false;
        continue;
      }
      for (int64_t k = 0; k < used; ++k) {
        const int32_t id = d.block_table[static_cast<size_t>(s * d.max_blocks + k)];
        u.block_min = any ? std::min(u.block_min, id) : id;
        u.block_max = any ? std::max(u.block_max, id) : id;
        any = true;
      }
    }
    u.checked_block_size = bs;
  }
  INFERA_CUDA_EXPECT(u.tables_fit, op, "a sequence is longer than its block table");
  INFERA_CUDA_EXPECT(u.block_max < 0 || (u.block_min >= 0 && u.block_max < blocks), op,
                     "block " + std::to_string(u.block_min < 0 ? u.block_min : u.block_max) +
                         " outside the cache's " + std::to_string(blocks) + " blocks");
}

void CudaBackend::kv_write(const Tensor& k, const Tensor& v, KvLayer& cache, const Batch& batch) {
  const char* op = "kv_write";
  expect_f32(k, op);
  expect_f32(v, op);
  INFERA_CUDA_EXPECT(k.rank() == 3 && v.shape() == k.shape() && k.dim(0) == batch.num_tokens(), op,
                     shapes(k, v));
  expect_pool(cache, k.dim(1), k.dim(2), op);
  INFERA_CUDA_EXPECT(!batch.slots.empty(), op, "the batch has no slots");
  const UploadedBatch& u = find_batch(batch.slots, kSlots, op);
  INFERA_CUDA_EXPECT(batch.slots.numel() == k.dim(0), op,
                     "slots must be I32 [" + std::to_string(k.dim(0)) + "]");
  const int64_t capacity = cache.keys.dim(1) * cache.keys.dim(2);
  INFERA_CUDA_EXPECT(u.min[kSlots] >= 0 && u.max[kSlots] < capacity, op,
                     "slot " + std::to_string(u.min[kSlots] < 0 ? u.min[kSlots] : u.max[kSlots]) +
                         " outside the cache's " + std::to_string(capacity));
  KvWriteArgs a{k.data_as<const float>(),
                v.data_as<const float>(),
                batch.slots.data_as<const int32_t>(),
                cache.keys.data(),
                cache.values.data(),
                elem_type(cache.keys.dtype()),
                k.dim(0),
                k.dim(1),
                cache.keys.dim(2),
                k.dim(2),
                cache.keys.dim(1)};
  ctx_->record(launch_kv_write, a, note(op, "kv_write", {&k, &cache.keys}));
}

namespace {

// The flash kernel's key split (attention_flash.cu): counted from the host's copy of the batch,
// the key tiles each (sequence, query tile) walks (its rows' union, 64 keys a tile; the window's
// far edge ignored, an overcount). When the longest tile walks clearly more than the GPU's
// resident blocks average, tiles are cut into chunks of `key_tiles` key tiles, about 1 / 2.5 of
// that average (a makespan model of the 2048-token prompt put chunks of 6-8 tiles at ~24 tile
// steps against 32 unsplit, for an average of 21; fewer splits leave longer chunks that land in
// the tail, more pay their partials' traffic). {1, 0}: no split.
struct FlashSplit {
  int64_t splits = 1, key_tiles = 0;
};
FlashSplit plan_flash_split(const BatchDesc& d, int64_t group, int64_t hkv, int64_t tiles,
                            int64_t vectors_per_tile, bool causal, int64_t slots,
                            int64_t forced_key_tiles) {
  if (!causal) return {};
  constexpr int64_t kKeys = 64;
  int64_t total = 0, longest = 0;
  for (int64_t b = 0; b < d.num_seqs(); ++b) {
    const int64_t first = d.query_start[size_t(b)], rows = d.query_start[size_t(b) + 1] - first;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t v_first = t * vectors_per_tile;
      if (v_first >= rows * group) break;
      const int64_t v_last = std::min(rows * group, v_first + vectors_per_tile) - 1;
      const int64_t keys = int64_t{d.positions[size_t(first + v_last / group)]} + 1;
      const int64_t n = (std::min<int64_t>(keys, d.seq_lens[size_t(b)]) + kKeys - 1) / kKeys;
      total += n * hkv;
      longest = std::max(longest, n);
    }
  }
  const int64_t average = (total + slots - 1) / std::max<int64_t>(1, slots);
  if (longest * 4 <= average * 5) return {};  // the longest tile is not the tail
  constexpr int64_t kMaxSplits = 16;
  const int64_t key_tiles = std::max<int64_t>(
      {forced_key_tiles > 0 ? forced_key_tiles : std::max<int64_t>(2, average * 2 / 5),
       (longest + kMaxSplits - 1) / kMaxSplits});
  const int64_t splits = (longest + key_tiles - 1) / key_tiles;
  if (splits <= 1 || tiles * splits > 65535) return {};
  return {splits, key_tiles};
}

}  // namespace

bool CudaBackend::flash_wgmma_applies(const Tensor& q, const Tensor& out, const KvLayer& cache,
                                      int64_t vectors) const {
  const ElemType type = elem_type(cache.keys.dtype());
  const int64_t head_dim = q.dim(2);
  const bool aligned = reinterpret_cast<uintptr_t>(out.data()) % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(cache.keys.data()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(cache.values.data()) % 16 == 0;
  const cudaDeviceProp& prop = ctx_->properties();
  return options_.mma_attention && !options_.exact_f32 && aligned &&
         attention_mma_supports(type, head_dim) && vectors >= 16 && options_.flash_attention &&
         attention_flash_supports(type, head_dim) &&
         (vectors + kMmaVectorsPerTile - 1) / kMmaVectorsPerTile <= 65535 &&
         reinterpret_cast<uintptr_t>(q.data()) % 16 == 0 && options_.flash_wgmma &&
         options_.flash_fast_softmax &&
         attention_flash_wgmma_supports(type, head_dim, cache.keys.dim(2), cache.keys.dim(1),
                                        prop.major, prop.minor);
}

bool CudaBackend::tma_attention_applies(const AttentionArgs& a, const BatchDesc& d) const {
  const cudaDeviceProp& prop = ctx_->properties();
  // Long prompts, or many items (attention_tma_schedule.h). Its 1D grid must fit int.
  const int64_t longest = d.max_query_len();
  const int64_t items = tma_schedule::work_items(a.hkv, a.num_seqs, longest, a.hq / a.hkv,
                                                 attention_tma_wgmma_vectors());
  return options_.flash_tma &&
         tma_schedule::wanted(longest, items, options_.flash_tma_min_rows,
                              prop.multiProcessorCount) &&
         attention_tma_wgmma_supports(a.type, a.head_dim, a.hkv, a.block_size, a.num_blocks,
                                      prop.major, prop.minor) &&
         a.hkv * a.num_seqs * a.tiles <= int64_t{0x7fffffff};
}

void CudaBackend::attention(const Tensor& q, const KvLayer& cache, const Batch& batch,
                            const AttentionParams& params, Tensor& out) {
  const char* op = "attention";
  expect_f32(q, op);
  expect_f32(out, op);
  INFERA_CUDA_EXPECT(q.rank() == 3 && out.shape() == q.shape() && q.dim(0) == batch.num_tokens(),
                     op, shapes(q, out));
  const Tensor& keys = cache.keys;
  INFERA_CUDA_EXPECT(
      keys.rank() == 4 && keys.dim(0) > 0 && q.dim(1) % keys.dim(0) == 0, op,
      "q heads " + std::to_string(q.dim(1)) + " must be a multiple of the cache's kv heads");
  expect_pool(cache, keys.dim(0), q.dim(2), op);
  const BatchDesc& d = *batch.desc;
  INFERA_CUDA_EXPECT(!d.block_table.empty() && !batch.block_table.empty(), op,
                     "the batch has no block table");
  const UploadedBatch& u = find_batch(batch.block_table, kBlockTable, op);
  INFERA_CUDA_EXPECT(u.desc == &d && !batch.positions.empty() && !batch.query_start.empty() &&
                         !batch.seq_lens.empty(),
                     op, "the batch needs positions, query_start and seq_lens");
  expect_tables_fit(u, cache, op);

  const int64_t hq = q.dim(1), hkv = keys.dim(0), head_dim = q.dim(2), group = hq / hkv;
  const int64_t seqs = d.num_seqs(), tokens = d.num_tokens();
  INFERA_CUDA_EXPECT(head_dim <= kSimtMaxHeadDim, op,
                     "head_dim " + std::to_string(head_dim) + " over the CUDA attention's " +
                         std::to_string(kSimtMaxHeadDim));
  INFERA_CUDA_EXPECT(seqs <= 65535 && hkv <= 65535, op, "more than 65535 sequences or kv heads");
  const int64_t vectors = int64_t{d.max_query_len()} * group;  // per (sequence, kv head), at most
  AttentionArgs a{};
  a.q = q.data_as<const float>();
  a.out = out.data_as<float>();
  a.keys = keys.data();
  a.values = cache.values.data();
  a.type = elem_type(keys.dtype());
  a.positions = batch.positions.data_as<const int32_t>();
  a.query_start = batch.query_start.data_as<const int32_t>();
  a.seq_lens = batch.seq_lens.data_as<const int32_t>();
  a.block_table = batch.block_table.data_as<const int32_t>();
  a.num_tokens = tokens;
  a.num_seqs = seqs;
  a.max_blocks = d.max_blocks;
  a.hq = hq;
  a.hkv = hkv;
  a.head_dim = head_dim;
  a.block_size = keys.dim(2);
  a.num_blocks = keys.dim(1);
  a.scale = params.scale;
  a.causal = params.causal ? 1 : 0;
  a.window = params.window;
  a.splits = 1;
  OpNote nt = note(op, "attention_simt", {&q, &keys});

  const bool aligned = reinterpret_cast<uintptr_t>(out.data()) % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(keys.data()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(cache.values.data()) % 16 == 0;
  if (options_.mma_attention && !options_.exact_f32 && aligned &&
      attention_mma_supports(a.type, head_dim) && vectors >= 16) {
    a.vectors_per_tile = kMmaVectorsPerTile;
    a.tiles = (vectors + kMmaVectorsPerTile - 1) / kMmaVectorsPerTile;
    if (options_.flash_attention && attention_flash_supports(a.type, head_dim) &&
        a.tiles <= 65535 && reinterpret_cast<uintptr_t>(q.data()) % 16 == 0) {  // float4 q loads
      nt.kernel = "attention_flash";
      a.fast_softmax = options_.flash_fast_softmax ? 1 : 0;
      a.interleaved = options_.flash_interleaved ? 1 : 0;
      a.out_bf16 = shadow_buffer(out);
      // The wide kernel: 128-vector tiles (base-2 softmax only).
      // CudaOptions::flash_wide_auto: 8 warps where many sequences fill the GPU with wide tiles.
      const int64_t wide_tiles = (vectors + kFlashWideVectors - 1) / kFlashWideVectors;
      const int64_t wide_warps =
          options_.flash_wide != 0 ? options_.flash_wide
          : options_.flash_wide_auto && d.max_query_len() <= 1024 &&
                  wide_tiles * seqs * hkv >= 3 * int64_t{ctx_->properties().multiProcessorCount}
              ? 8
              : 0;
      // The Hopper warpgroup-MMA kernel (attention_flash_wgmma.cu): no key split across blocks.
      const cudaDeviceProp& prop = ctx_->properties();
      const bool wgmma = flash_wgmma_applies(q, out, cache, vectors);
      if (wgmma) {
        nt.kernel = "attention_flash_wgmma";
        // 128-vector tiles (a warpgroup each 64: K/V read once for twice the queries) where
        // they fill every SM's 2 block slots; else 64-vector tiles whose 2 warpgroups split the
        // keys (short prompts: more blocks; long ones: half the longest tile's serial walk).
        const int64_t big = (vectors + kFlashWgmmaVectors - 1) / kFlashWgmmaVectors;
        const int64_t forced = options_.flash_wgmma_vectors;  // 64 or 128; anything else: auto
        a.vectors_per_tile =
            forced == kFlashWgmmaSmallVectors || forced == kFlashWgmmaVectors ? forced
            : big * seqs * hkv < 2 * int64_t{prop.multiProcessorCount} ? kFlashWgmmaSmallVectors
                                                                       : kFlashWgmmaVectors;
        a.tiles = (vectors + a.vectors_per_tile - 1) / a.vectors_per_tile;
        a.pipelined = options_.flash_wgmma_pipeline ? 1 : 0;  // the 64-vector tiles' loop
        a.tune = options_.flash_wgmma_q_prefetch ? kWgmmaQPrefetch : 0;
        if (stack_attention_.q == a.q) {  // the GEMM decoder stack's hand-offs
          a.q16 = stack_attention_.q16;
          if (stack_attention_.bf16_out_only && a.out_bf16) a.out = nullptr;
          stack_attention_.taken = true;
        }
        if (tma_attention_applies(a, d)) {
          TmaAttentionArgs t;
          std::memset(static_cast<void*>(&t), 0, sizeof t);  // padding too: it is the step's key
          t.a = a;
          t.a.vectors_per_tile = attention_tma_wgmma_vectors();
          t.a.tiles = (vectors + t.a.vectors_per_tile - 1) / t.a.vectors_per_tile;
          t.a.stages = options_.flash_tma_stages;
          t.a.tune = options_.flash_tma_pingpong ? kTmaPingPong : 0;
          const int64_t items = hkv * seqs * t.a.tiles;
          const int64_t most = options_.flash_tma_max_blocks > 0
                                   ? options_.flash_tma_max_blocks
                                   : int64_t{ctx_->properties().multiProcessorCount};
          t.grid = options_.flash_tma_persistent ? std::min(items, most) : items;
          if (options_.flash_tma_queries && a.q16 &&
              encode_query_map(&t.queries, a.q16, a.num_tokens, hq, hq / hkv, head_dim))
            t.a.tune |= kTmaQueries;
          if (encode_kv_pool_map(&t.keys, a.type, a.keys, hkv, a.num_blocks, a.block_size,
                                 head_dim) &&
              encode_kv_pool_map(&t.values, a.type, a.values, hkv, a.num_blocks, a.block_size,
                                 head_dim)) {
            nt.kernel = "attention_tma_wgmma";
            ctx_->record(launch_attention_tma_wgmma, t, nt);
            ++tma_attentions_;
            if (t.a.tune & kTmaQueries) ++tma_queries_;
            return publish_shadow(out, a.out_bf16);
          }
        }
        ctx_->record(launch_attention_flash_wgmma, a, nt);
        return publish_shadow(out, a.out_bf16);
      }
      const bool wide = wide_warps != 0 && options_.flash_fast_softmax;
      if (wide) {
        nt.kernel = "attention_flash_wide";
        a.vectors_per_tile = kFlashWideVectors;
        a.tiles = wide_tiles;
        a.wide_warps = wide_warps;
      }
      // Or the key-halves kernel: 64-vector tiles, no split.
      const bool halves = !wide && options_.flash_key_halves && options_.flash_fast_softmax;
      if (halves) nt.kernel = "attention_flash_halves";
      if (options_.flash_split_keys && !halves) {
        const int64_t slots =
            ctx_->properties().multiProcessorCount *
            (wide ? kFlashWideBlocksPerSm : attention_flash_blocks_per_sm(head_dim));
        const FlashSplit sp =
            plan_flash_split(d, group, hkv, a.tiles, a.vectors_per_tile, params.causal, slots,
                             options_.flash_split_key_tiles);
        if (sp.splits > 1) {
          nt.kernel = wide ? "attention_flash_wide_split" : "attention_flash_split";
          a.splits = sp.splits;
          a.split_key_tiles = sp.key_tiles;
          const int64_t vecs = a.splits * tokens * hq;
          a.partial_out = static_cast<float*>(ctx_->scratch(
              DeviceContext::kAttentionPartials, static_cast<size_t>(vecs * head_dim) * 4));
          a.partial_ml = static_cast<float*>(
              ctx_->scratch(DeviceContext::kAttentionMaxSum, static_cast<size_t>(vecs) * 8));
          a.split_counters = static_cast<unsigned*>(
              ctx_->zeroed_scratch(DeviceContext::kAttentionSplitCounters,
                                   static_cast<size_t>(a.tiles * seqs * hkv) * sizeof(unsigned)));
        }
      }
      ctx_->record(wide     ? launch_attention_flash_wide
                   : halves ? launch_attention_flash_halves
                            : launch_attention_flash,
                   a, nt);
      return publish_shadow(out, a.out_bf16);
    }
    nt.kernel = "attention_mma";
    return ctx_->record(launch_attention_mma, a, nt);
  }
  const int64_t sms = ctx_->properties().multiProcessorCount;
  const int64_t capacity = int64_t{d.max_blocks} * a.block_size;
  // Split keys across blocks when there are too few (sequence, kv head) tiles to fill the GPU.
  // The split count depends only on the batch's shape and its block tables' capacity, so that
  // successive decode steps launch identically and replay as one graph.
  auto use_splits = [&](int64_t splits) {
    a.splits = std::clamp<int64_t>(splits, 1, std::max<int64_t>(1, 65535 / hkv));
    if (a.splits == 1) return;
    const int64_t vecs = a.splits * tokens * hq;
    a.partial_out = static_cast<float*>(
        ctx_->scratch(DeviceContext::kAttentionPartials, static_cast<size_t>(vecs * head_dim) * 4));
    a.partial_ml = static_cast<float*>(
        ctx_->scratch(DeviceContext::kAttentionMaxSum, static_cast<size_t>(vecs) * 8));
    a.split_counters = static_cast<unsigned*>(
        ctx_->zeroed_scratch(DeviceContext::kAttentionSplitCounters,
                             static_cast<size_t>(a.tiles * seqs * hkv) * sizeof(unsigned)));
  };
  auto split_keys = [&](int64_t blocks, int64_t keys_per_split) {
    use_splits(std::clamp<int64_t>(
        std::min((4 * sms + blocks - 1) / blocks, capacity / keys_per_split), 1, 32));
  };
  if (options_.decode_attention && options_.decode_staged && vectors <= kDecodeMaxVectors &&
      aligned && attention_decode_staged_supports(a.type, head_dim)) {
    a.vectors_per_tile = vectors;
    a.tiles = 1;
    a.stages = options_.decode_stages;
    a.tune = decode_tune();
    // The deferred qk-norm of this q and cache (CudaOptions::fuse_qk_attention), one row per
    // sequence: done by this launch.
    if (pending_qk_ && pending_qk_->q == a.q && pending_qk_->key_pool == a.keys &&
        pending_qk_->value_pool == a.values && d.max_query_len() == 1 && a.stages == 3 &&
        pending_qk_->head_dim == head_dim && pending_qk_->n == tokens &&
        pending_qk_->positions == a.positions) {
      a.fused_qk = 1;
      a.qk = *pending_qk_;
      pending_qk_.reset();
    }
    // The tensor-core kernel where it applies (CudaOptions::decode_mma).
    const bool mma = !a.fused_qk && options_.decode_mma && !options_.exact_f32 &&
                     attention_decode_mma_supports(a.type, head_dim) &&
                     reinterpret_cast<uintptr_t>(q.data()) % 8 == 0;  // float2 q loads
    if (mma) a.stages = options_.decode_mma_config;  // its shape (attention_decode_mma.h)
    const int64_t slots =
        sms * (mma ? attention_decode_mma_blocks_per_sm(head_dim, a.stages)
                   : attention_decode_staged_blocks_per_sm(head_dim, vectors, a.stages));
    use_splits(options_.decode_splits > 0
                   ? options_.decode_splits
                   : plan_decode_staged_splits(seqs * hkv, capacity, slots,
                                               options_.decode_split_keys, 65535 / hkv));
    nt.kernel = mma ? (a.splits > 1 ? "attention_decode_mma_split" : "attention_decode_mma")
                : a.splits > 1 ? "attention_decode_staged_split"
                               : "attention_decode_staged";
    if (options_.decode_attention_shadow) a.out_bf16 = shadow_buffer(out);
    ctx_->record(mma ? launch_attention_decode_mma : launch_attention_decode_staged, a, nt);
    return publish_shadow(out, a.out_bf16);
  }
  if (options_.decode_attention && vectors <= kDecodeMaxVectors && aligned &&
      attention_decode_supports(a.type, head_dim)) {
    a.vectors_per_tile = vectors;
    a.tiles = 1;
    a.pipelined = options_.decode_pipeline ? 1 : 0;
    if (seqs * hkv < 4 * sms) split_keys(seqs * hkv, options_.decode_split_keys);
    nt.kernel = a.splits > 1 ? "attention_decode_split" : "attention_decode";
    return ctx_->record(launch_attention_decode, a, nt);
  }
  const auto smem_limit = static_cast<int64_t>(ctx_->properties().sharedMemPerBlockOptin);
  int64_t vpt = std::min<int64_t>(32, vectors);
  while (vpt > 1 && attention_simt_smem_bytes(vpt, head_dim) > smem_limit) vpt = (vpt + 1) / 2;
  INFERA_CUDA_EXPECT(
      attention_simt_smem_bytes(vpt, head_dim) <= smem_limit, op,
      "head_dim " + std::to_string(head_dim) + " needs more shared memory than the GPU has");
  a.vectors_per_tile = vpt;
  a.tiles = (vectors + vpt - 1) / vpt;
  // Few queries (decode): split each sequence's keys across blocks so the GPU fills up.
  const int64_t blocks = a.tiles * seqs * hkv;
  if (d.max_query_len() <= 4 && blocks < 4 * sms) split_keys(blocks, 32);
  if (a.splits > 1) nt.kernel = "attention_simt_split";
  ctx_->record(launch_attention_simt, a, nt);
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  const char* op = "swiglu";
  expect_f32(gate, op);
  expect_f32(up, op);
  expect_f32(out, op);
  INFERA_CUDA_EXPECT(gate.numel() == up.numel() && out.numel() == gate.numel(), op,
                     shapes(gate, up));
  void* shadow = shadow_buffer(out);
  ctx_->record(launch_swiglu,
               BinaryArgs{gate.data_as<const float>(), up.data_as<const float>(),
                          out.data_as<float>(), gate.numel(), shadow},
               note(op, "swiglu", {&gate, &up}));
  publish_shadow(out, shadow);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* op = "add";
  expect_f32(a, op);
  expect_f32(b, op);
  expect_f32(out, op);
  INFERA_CUDA_EXPECT(a.numel() == b.numel() && out.numel() == a.numel(), op, shapes(a, b));
  ctx_->record(launch_add,
               BinaryArgs{a.data_as<const float>(), b.data_as<const float>(), out.data_as<float>(),
                          a.numel()},
               note(op, "add", {&a, &b}));
}

void CudaBackend::gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) {
  const char* op = "gather_rows";
  expect_f32(src, op);
  expect_f32(dst, op);
  const int64_t width = row_width(src), n = row_count(src);
  INFERA_CUDA_EXPECT(row_width(dst) == width, op, shapes(src, dst));
  const UploadedBatch& u = find_batch(rows, kRows, op);
  INFERA_CUDA_EXPECT(rows.numel() == row_count(dst), op,
                     "rows [" + std::to_string(rows.numel()) + "] for dst " + dst.shape().str());
  INFERA_CUDA_EXPECT(u.min[kRows] >= 0 && u.max[kRows] < n, op,
                     "row " + std::to_string(u.min[kRows] < 0 ? u.min[kRows] : u.max[kRows]) +
                         " outside [0, " + std::to_string(n) + ")");
  ctx_->record(launch_gather_rows,
               GatherRowsArgs{src.data_as<const float>(), rows.data_as<const int32_t>(),
                              dst.data_as<float>(), row_count(dst), width},
               note(op, "gather_rows", {&src, &dst}));
}

}  // namespace infera::cuda
