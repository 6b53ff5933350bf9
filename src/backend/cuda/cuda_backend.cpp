// The CUDA backend: device selection, memory (weights uploaded once, zeroed activations), the
// batch upload (one pinned copy per step into pooled device buffers, so that a decode step of a
// fixed shape finds its indices at the same addresses and replays as a graph), the RoPE table
// and the factory functions. The ops are in cuda_ops.cpp.
#include <cuda_profiler_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "infera/error.h"

namespace infera {
namespace cuda {

// Device buffers for uploaded batches, kept for reuse by size bucket (powers of two from 4 KiB):
// a step of the same shape as the last gets the buffer the last one released.
struct BatchBufferPool {
  std::shared_ptr<DeviceContext> ctx;
  std::map<size_t, std::vector<void*>> free;
  size_t free_count = 0;

  static size_t bucket(size_t bytes) {
    size_t b = 4096;
    while (b < bytes) b *= 2;
    return b;
  }
  void* acquire(size_t bucket_bytes) {
    auto& list = free[bucket_bytes];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      --free_count;
      return p;
    }
    return ctx->allocate(bucket_bytes, "a batch's indices");
  }
  void give_back(void* p, size_t bucket_bytes) {
    if (free_count >= 16) {  // many shapes went by (prefill chunks): keep the pool small
      ctx->release(p);
      return;
    }
    free[bucket_bytes].push_back(p);
    ++free_count;
  }
  ~BatchBufferPool() {
    for (auto& [size, list] : free)
      for (void* p : list) ctx->release(p);
  }
};

namespace {

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "off") == 0);
}

}  // namespace

CudaBackend::CudaBackend(int device, const CudaOptions& options)
    : options_(options),
      ctx_(std::make_shared<DeviceContext>(
          device, ContextOptions{.graphs = options.graphs && !options.sync_each_op,
                                 .sync_each_op = options.sync_each_op,
                                 .profile = options.profile,
                                 .stream_new_steps = options.stream_new_steps,
                                 .replay_chunks = options.replay_chunks})),
      batches_(std::make_shared<std::vector<UploadedBatch>>()),
      batch_pool_(std::make_shared<BatchBufferPool>()) {
  batch_pool_->ctx = ctx_;
  if (options_.gemv_max_rows < 0 || options_.gemv_max_rows > kGemvMaxRows)
    throw InvalidArgument("CUDA GEMV row limit must be within [0, " + std::to_string(kGemvMaxRows) +
                          "]");
  if (options_.skinny_max_rows < 0 || options_.skinny_max_rows > 4096)
    throw InvalidArgument("CUDA skinny GEMM row limit must be within [0, 4096]");
  if (options_.stream_gemm_max_rows < 1 || options_.stream_gemm_max_rows > 256 ||
      options_.stream_gemm_min_rows < 0 ||
      options_.stream_gemm_min_rows > options_.stream_gemm_max_rows)
    throw InvalidArgument(
        "CUDA stream GEMM rows must be lo:hi with 0 <= lo <= hi and 1 <= hi <= 256 (lo 0: past "
        "the GEMV)");
  if (options_.encoder_stream_glu_max_rows < 0 || options_.encoder_stream_glu_max_rows > 128)
    throw InvalidArgument("CUDA encoder stream GeGLU rows must be within [0, 128]");
  set_programmatic_launch(options_.programmatic_launch);
  ctx_->set_before_record([this] { record_pending_qk(); });
}

CudaBackend::~CudaBackend() {
  try {
    record_pending_qk();
  } catch (const std::exception&) {
  }
  ctx_->set_before_record(nullptr);
  try {
    ctx_->synchronize("finish pending work");
    write_decode_stack_trace();
  } catch (const std::exception&) {
  }
}

std::string CudaBackend::name() const {
  const cudaDeviceProp& p = ctx_->properties();
  return std::string("cuda (") + p.name + ", sm_" + std::to_string(p.major) +
         std::to_string(p.minor) + ", " + std::to_string(p.multiProcessorCount) + " SMs" +
         (options_.graphs && !options_.sync_each_op ? ", graphs" : "") +
         (options_.exact_f32 ? ", exact f32" : "") + ")";
}

bool CudaBackend::supports(Op op, std::initializer_list<DType> dtypes) const {
  for (DType t : dtypes) {
    const bool is_float = t == DType::F32 || t == DType::F16 || t == DType::BF16;
    // Q8_0 / Q4_0 weights: plain matmul only (dequantized inside its kernel).
    if (op == Op::Matmul && (t == DType::Q8_0 || t == DType::Q4_0)) continue;
    const bool ok =
        (op == Op::Embedding || op == Op::Matmul || op == Op::RmsNorm || op == Op::KvWrite ||
         op == Op::Attention || op == Op::LayerNorm || op == Op::AddBias || op == Op::AddRmsNorm ||
         op == Op::MatmulSwiglu || op == Op::QkNormRopeKvWrite || op == Op::AddLayerNorm ||
         op == Op::MatmulGeglu || op == Op::ResidualMlp || op == Op::RmsNormMatmulMulti ||
         op == Op::OutputMlp || op == Op::DecoderStack || op == Op::EncoderStack)
            ? is_float
            : t == DType::F32;
    if (!ok) return false;
  }
  return true;
}

Tensor CudaBackend::device_tensor(const std::string& name, DType dtype, Shape shape) {
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(shape.numel()));
  void* p = ctx_->allocate(bytes, name + " " + shape.str());
  std::shared_ptr<DeviceContext> ctx = ctx_;
  return Tensor(name, dtype, shape, Device::CUDA, p,
                std::shared_ptr<void>(p, [ctx](void* q) { ctx->release(q); }));
}

Tensor CudaBackend::alloc(const std::string& name, DType dtype, Shape shape) {
  shadow_ = {};  // the new tensor may sit where a shadowed (since freed) one was
  Tensor t = device_tensor(name, dtype, shape);
  check_cuda(cudaMemsetAsync(t.data(), 0, t.nbytes(), ctx_->stream()), "zero " + name);
  return t;
}

namespace {

void expect_uploadable(const Tensor& host_weight, const char* op) {
  const DType t = host_weight.dtype();
  if (!(t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 ||
        t == DType::Q4_0))
    throw InvalidArgument(std::string("[") + op + "] tensor " + host_weight.name() + ": dtype " +
                          std::string(dtype_name(t)) + " is not supported on cuda");
  if (host_weight.device() != Device::CPU)
    throw InvalidArgument(std::string("[") + op + "] tensor " + host_weight.name() +
                          " must be in host memory");
}

}  // namespace

Tensor CudaBackend::prepare_weight(const Tensor& host_weight) {
  expect_uploadable(host_weight, "prepare_weight");
  Tensor d = device_tensor(host_weight.name(), host_weight.dtype(), host_weight.shape());
  ctx_->upload(d.data(), host_weight.data(), d.nbytes());
  return d;
}

// One allocation, each weight at the next 256-byte boundary after the one before: weights whose
// sizes are multiples of 256 bytes (the models' bf16 projections) end exactly where the next
// begins, which is what the decoder stack's one q/k/v GEMM checks for.
std::vector<Tensor> CudaBackend::prepare_weights(std::span<const Tensor> host_weights) {
  constexpr size_t kAlign = 256;
  std::vector<size_t> offsets;
  size_t total = 0;
  std::string names;
  for (const Tensor& w : host_weights) {
    expect_uploadable(w, "prepare_weights");
    offsets.push_back(total);
    total += (w.nbytes() + kAlign - 1) / kAlign * kAlign;
    names += (names.empty() ? "" : ", ") + w.name();
  }
  if (host_weights.empty()) return {};
  void* base = ctx_->allocate(total, names);
  std::shared_ptr<DeviceContext> ctx = ctx_;
  const std::shared_ptr<void> owner(base, [ctx](void* q) { ctx->release(q); });
  std::vector<Tensor> out;
  for (size_t i = 0; i < host_weights.size(); ++i) {
    const Tensor& w = host_weights[i];
    void* p = static_cast<char*>(base) + offsets[i];
    out.emplace_back(w.name(), w.dtype(), w.shape(), Device::CUDA, p, owner);
    ctx_->upload(p, w.data(), w.nbytes());
  }
  return out;
}

void CudaBackend::to_host(const Tensor& src, std::span<float> dst) {
  if (src.empty() || src.device() != Device::CUDA || src.dtype() != DType::F32)
    throw InvalidArgument("[to_host] tensor " + src.name() + " must be F32 on cuda");
  if (static_cast<int64_t>(dst.size()) != src.numel())
    throw InvalidArgument("[to_host] tensor " + src.name() + " " + src.shape().str() + " into " +
                          std::to_string(dst.size()) + " floats");
  ctx_->flush();
  check_cuda(
      cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToHost, ctx_->stream()),
      "copy " + src.name() + " " + src.shape().str() + " to the host");
  check_cuda(cudaStreamSynchronize(ctx_->stream()),
             "run the step that produced " + src.name() + " " + src.shape().str());
}

void CudaBackend::synchronize() { ctx_->synchronize("synchronize"); }

Batch CudaBackend::upload_batch(const BatchDesc& desc) {
  // Launches that name a pooled buffer must be issued before the buffer is rewritten.
  ctx_->flush();
  ctx_->set_step_pdl(options_.pdl_max_step_tokens < 0 ||
                     desc.num_tokens() <= options_.pdl_max_step_tokens);
  const std::vector<int32_t>* fields[kBatchFields] = {
      &desc.tokens,   &desc.positions,   &desc.slots,      &desc.query_start,
      &desc.seq_lens, &desc.block_table, &desc.output_rows};
  static const char* const kNames[kBatchFields] = {
      "tokens", "positions", "slots", "query_start", "seq_lens", "block_table", "output_rows"};
  size_t offsets[kBatchFields], total = 0;
  for (int f = 0; f < kBatchFields; ++f) {
    offsets[f] = total;
    total += (fields[f]->size() + 3) / 4 * 16;  // 16-byte aligned fields
  }
  total = std::max<size_t>(total, 16);
  auto* staging = static_cast<uint8_t*>(ctx_->batch_staging(total));
  for (int f = 0; f < kBatchFields; ++f)
    if (!fields[f]->empty())
      std::memcpy(staging + offsets[f], fields[f]->data(), fields[f]->size() * 4);
  const size_t bucket = BatchBufferPool::bucket(total);
  void* buffer = batch_pool_->acquire(bucket);
  check_cuda(cudaMemcpyAsync(buffer, staging, total, cudaMemcpyHostToDevice, ctx_->stream()),
             "upload a batch of " + std::to_string(desc.num_tokens()) + " tokens");
  ctx_->batch_staging_used();

  UploadedBatch up;
  up.desc = &desc;
  up.buffer = buffer;
  for (int f = 0; f < kBatchFields; ++f) {
    const std::vector<int32_t>& v = *fields[f];
    up.fields[f] = v.empty() ? nullptr : static_cast<uint8_t*>(buffer) + offsets[f];
    up.counts[f] = static_cast<int64_t>(v.size());
    if (!v.empty()) {
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      up.min[f] = *lo;
      up.max[f] = *hi;
    }
  }
  batches_->push_back(up);
  std::shared_ptr<std::vector<UploadedBatch>> live = batches_;
  std::shared_ptr<BatchBufferPool> pool = batch_pool_;
  std::shared_ptr<void> owner(buffer, [live, pool, bucket](void* p) {
    live->erase(std::remove_if(live->begin(), live->end(),
                               [p](const UploadedBatch& u) { return u.buffer == p; }),
                live->end());
    pool->give_back(p, bucket);
  });
  Batch b;
  b.desc = &desc;
  Tensor* tensors[kBatchFields] = {&b.tokens,   &b.positions,   &b.slots,      &b.query_start,
                                   &b.seq_lens, &b.block_table, &b.output_rows};
  for (int f = 0; f < kBatchFields; ++f)
    if (up.fields[f])
      *tensors[f] = Tensor(kNames[f], DType::I32, {up.counts[f]}, Device::CUDA,
                           const_cast<void*>(up.fields[f]), owner);
  return b;
}

const UploadedBatch& CudaBackend::find_batch(const Tensor& t, int field, const char* op,
                                             int* found) const {
  for (const UploadedBatch& u : *batches_)
    for (int f = 0; f < kBatchFields; ++f)
      if ((field < 0 || f == field) && t.data() != nullptr && u.fields[f] == t.data() &&
          u.counts[f] == t.numel()) {
        if (found) *found = f;
        return u;
      }
  throw InvalidArgument(std::string("[") + op + "] index tensor " + t.name() +
                        " must be a tensor of a Batch that upload_batch made on this backend");
}

const CudaBackend::RopeTable& CudaBackend::rope_table(double theta, int64_t d, int32_t max_pos) {
  RopeTable* t = nullptr;
  for (RopeTable& r : rope_tables_)
    if (r.theta == theta && r.head_dim == d) t = &r;
  if (!t) t = &rope_tables_.emplace_back(RopeTable{theta, d, 0, {}, {}});
  if (max_pos < t->positions) return *t;
  // Computed on the host in f32 exactly as the CPU backend and transformers do, grown
  // geometrically so that decode rarely recomputes it (a new table changes the graphs' keys).
  const int64_t half = d / 2;
  const int64_t want =
      std::max<int64_t>(int64_t{max_pos} + 1, std::max<int64_t>(2 * t->positions, 4096));
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    const float expo = static_cast<float>(2 * j) / static_cast<float>(d);
    inv_freq[static_cast<size_t>(j)] =
        1.0f / static_cast<float>(std::pow(static_cast<float>(theta), expo));
  }
  std::vector<float> cos(static_cast<size_t>(want * half)), sin(cos.size());
  for (int64_t p = 0; p < want; ++p)
    for (int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(p) * inv_freq[static_cast<size_t>(j)];
      cos[static_cast<size_t>(p * half + j)] = std::cos(angle);
      sin[static_cast<size_t>(p * half + j)] = std::sin(angle);
    }
  t->cos = device_tensor("rope.cos", DType::F32, {want, half});
  t->sin = device_tensor("rope.sin", DType::F32, {want, half});
  ctx_->upload(t->cos.data(), cos.data(), cos.size() * 4);
  ctx_->upload(t->sin.data(), sin.data(), sin.size() * 4);
  t->positions = want;
  return *t;
}

std::string CudaBackend::profile_report() {
  if (!options_.profile) return "";
  ctx_->synchronize("finish profiled work");
  std::string r = ctx_->profile_report();
  ctx_->profile_reset();
  return r;
}

CudaStats CudaBackend::stats() const {
  const ContextStats& s = ctx_->stats();
  return {s.ops,
          s.eager_steps,
          s.graph_captures,
          s.graph_launches,
          s.streamed_steps,
          s.early_chunks,
          s.host_record_seconds,
          s.recorded_steps,
          shadow_uses_,
          s.host_flush_seconds,
          paired_gemms_,
          residual_mlp_kernels_,
          fused_gemvs_,
          decode_stack_kernels_,
          decode_stack_ring_,
          gemm_stacks_,
          gemm_stack_qkv_one_,
          encoder_stacks_,
          packed_wgmma_,
          packed_rope_inside_,
          encoder_stream_glu_,
          tma_attentions_,
          tma_queries_,
          glu_gemms_,
          qkv_gemms_,
          residual_gemms_};
}

}  // namespace cuda

CudaOptions cuda_options_from_env() {
  CudaOptions o;
  o.graphs = cuda::env_flag("INFERA_CUDA_GRAPHS", o.graphs);
  o.sync_each_op = cuda::env_flag("INFERA_CUDA_SYNC", o.sync_each_op);
  o.exact_f32 = cuda::env_flag("INFERA_CUDA_EXACT", o.exact_f32);
  o.mma_attention = cuda::env_flag("INFERA_CUDA_MMA", o.mma_attention);
  o.flash_attention = cuda::env_flag("INFERA_CUDA_FLASH", o.flash_attention);
  o.flash_fast_softmax = cuda::env_flag("INFERA_CUDA_FLASH_FAST", o.flash_fast_softmax);
  o.flash_split_keys = cuda::env_flag("INFERA_CUDA_FLASH_SPLIT", o.flash_split_keys);
  o.flash_interleaved = cuda::env_flag("INFERA_CUDA_FLASH_INTERLEAVED", o.flash_interleaved);
  if (const char* v = std::getenv("INFERA_CUDA_FLASH_WIDE"); v && *v) {
    const int w = std::atoi(v);
    o.flash_wide = w == 1 || w == 4 ? 4 : w == 8 ? 8 : 0;
  }
  o.flash_key_halves = cuda::env_flag("INFERA_CUDA_FLASH_HALVES", o.flash_key_halves);
  o.flash_wgmma = cuda::env_flag("INFERA_CUDA_FLASH_WGMMA", o.flash_wgmma);
  if (const char* v = std::getenv("INFERA_CUDA_FLASH_WGMMA_VECTORS"); v && *v) {
    const int n = std::atoi(v);
    o.flash_wgmma_vectors = n == 64 || n == 128 ? n : 0;
  }
  o.flash_wgmma_pipeline =
      cuda::env_flag("INFERA_CUDA_FLASH_WGMMA_PIPELINE", o.flash_wgmma_pipeline);
  o.flash_wgmma_q_prefetch =
      cuda::env_flag("INFERA_CUDA_FLASH_WGMMA_Q_PREFETCH", o.flash_wgmma_q_prefetch);
  o.flash_wide_auto = cuda::env_flag("INFERA_CUDA_FLASH_WIDE_AUTO", o.flash_wide_auto);
  o.packed_flash_halves = cuda::env_flag("INFERA_CUDA_PACKED_FLASH_HALVES", o.packed_flash_halves);
  o.packed_wgmma = cuda::env_flag("INFERA_CUDA_PACKED_WGMMA", o.packed_wgmma);
  o.packed_rope_inside = cuda::env_flag("INFERA_CUDA_PACKED_ROPE_INSIDE", o.packed_rope_inside);
  o.rope_stage = cuda::env_flag("INFERA_CUDA_ROPE_STAGE", o.rope_stage);
  if (const char* v = std::getenv("INFERA_CUDA_FLASH_SPLIT_TILES"); v && *v)
    o.flash_split_key_tiles = std::max(0, std::atoi(v));
  o.bf16_shadow = cuda::env_flag("INFERA_CUDA_BF16_SHADOW", o.bf16_shadow);
  o.glu_bf16_gemm = cuda::env_flag("INFERA_CUDA_GLU_BF16", o.glu_bf16_gemm);
  o.qk_norm_by_token = cuda::env_flag("INFERA_CUDA_QKNORM_TOKEN", o.qk_norm_by_token);
  o.mlp_bf16_only = cuda::env_flag("INFERA_CUDA_MLP_BF16_ONLY", o.mlp_bf16_only);
  o.glu_gemm = cuda::env_flag("INFERA_CUDA_GLU_GEMM", o.glu_gemm);
  if (const char* v = std::getenv("INFERA_CUDA_GLU_GEMM_ROWS"); v && *v)
    o.glu_gemm_min_rows = std::max<int64_t>(1, std::atoll(v));
  if (const char* v = std::getenv("INFERA_CUDA_GLU_GEMM_TILE"); v && *v)
    o.glu_gemm_tile_cols = std::atoll(v);
  o.qkv_gemm = cuda::env_flag("INFERA_CUDA_QKV_GEMM", o.qkv_gemm);
  o.residual_gemm = cuda::env_flag("INFERA_CUDA_RESIDUAL_GEMM", o.residual_gemm);
  if (const char* v = std::getenv("INFERA_CUDA_RESIDUAL_GEMM_ROWS"); v && *v)
    o.residual_gemm_min_rows = std::max<int64_t>(1, std::atoll(v));
  if (const char* v = std::getenv("INFERA_CUDA_RESIDUAL_GEMM_TILE"); v && *v)
    o.residual_gemm_tile_cols = std::atoll(v);
  o.tma_gemm_pingpong = cuda::env_flag("INFERA_CUDA_TMA_GEMM_PINGPONG", o.tma_gemm_pingpong);
  o.decode_pipeline = cuda::env_flag("INFERA_CUDA_DECODE_PIPELINE", o.decode_pipeline);
  o.stream_new_steps = cuda::env_flag("INFERA_CUDA_STREAM", o.stream_new_steps);
  o.flash_tma = cuda::env_flag("INFERA_CUDA_FLASH_TMA", o.flash_tma);
  if (const char* v = std::getenv("INFERA_CUDA_FLASH_TMA_MIN_ROWS"); v && *v)
    o.flash_tma_min_rows = std::max(0, std::atoi(v));
  if (const char* v = std::getenv("INFERA_CUDA_FLASH_TMA_STAGES"); v && *v)
    o.flash_tma_stages = std::atoi(v) == 3 ? 3 : 2;
  o.flash_tma_pingpong = cuda::env_flag("INFERA_CUDA_FLASH_TMA_PINGPONG", o.flash_tma_pingpong);
  o.flash_tma_queries = cuda::env_flag("INFERA_CUDA_FLASH_TMA_QUERIES", o.flash_tma_queries);
  o.flash_tma_persistent =
      cuda::env_flag("INFERA_CUDA_FLASH_TMA_PERSISTENT", o.flash_tma_persistent);
  o.replay_chunks = cuda::env_flag("INFERA_CUDA_REPLAY_CHUNKS", o.replay_chunks);
  o.cublaslt_plans = cuda::env_flag("INFERA_CUDA_CUBLASLT", o.cublaslt_plans);
  o.decode_attention = cuda::env_flag("INFERA_CUDA_DECODE_ATTENTION", o.decode_attention);
  o.fused = cuda::env_flag("INFERA_CUDA_FUSED", o.fused);
  o.packed_dense = cuda::env_flag("INFERA_CUDA_PACKED_DENSE", o.packed_dense);
  o.packed_mma = cuda::env_flag("INFERA_CUDA_PACKED_MMA", o.packed_mma);
  o.packed_flash = cuda::env_flag("INFERA_CUDA_PACKED_FLASH", o.packed_flash);
  o.layernorm_in_registers =
      cuda::env_flag("INFERA_CUDA_LAYERNORM_REGISTERS", o.layernorm_in_registers);
  o.profile = cuda::env_flag("INFERA_CUDA_PROFILE", o.profile);
  o.programmatic_launch = cuda::env_flag("INFERA_CUDA_PDL", o.programmatic_launch);
  if (const char* v = std::getenv("INFERA_CUDA_PDL_MAX_TOKENS"); v && *v)
    o.pdl_max_step_tokens = std::atoll(v);
  if (const char* v = std::getenv("INFERA_CUDA_PDL_EARLY"); v && *v)
    o.pdl_early_trigger = std::clamp(std::atoi(v), 0, 2);
  o.gemv_preload = cuda::env_flag("INFERA_CUDA_GEMV_PRELOAD", o.gemv_preload);
  o.decode_kv_prefetch = cuda::env_flag("INFERA_CUDA_KV_PREFETCH", o.decode_kv_prefetch);
  o.params_early = cuda::env_flag("INFERA_CUDA_PARAMS_EARLY", o.params_early);
  o.fuse_qk_attention = cuda::env_flag("INFERA_CUDA_FUSE_QK", o.fuse_qk_attention);
  o.residual_mlp = cuda::env_flag("INFERA_CUDA_PERSISTENT", o.residual_mlp);
  o.b1_fused_chain = cuda::env_flag("INFERA_CUDA_B1_FUSE", o.b1_fused_chain);
  o.decode_stack = cuda::env_flag("INFERA_CUDA_DECODE_STACK", o.decode_stack);
  if (const char* v = std::getenv("INFERA_CUDA_DECODE_STACK_SPLITS"); v && *v)
    o.decode_stack_splits = std::max(0, std::atoi(v));
  if (const char* v = std::getenv("INFERA_CUDA_DECODE_STACK_TRACE"); v) o.decode_stack_trace = v;
  o.decode_stack_smem = cuda::env_flag("INFERA_CUDA_DECODE_STACK_SMEM", o.decode_stack_smem);
  if (const char* v = std::getenv("INFERA_CUDA_DECODE_STACK_RING_KIB"); v && *v)
    o.decode_stack_ring_kib = std::max(0, std::atoi(v));
  o.decode_stack_l2 = cuda::env_flag("INFERA_CUDA_DECODE_STACK_L2", o.decode_stack_l2);
  o.encoder_stack = cuda::env_flag("INFERA_CUDA_ENCODER_STACK", o.encoder_stack);
  if (const char* v = std::getenv("INFERA_CUDA_ENCODER_STREAM_GLU"); v && *v)
    o.encoder_stream_glu_max_rows = std::atoll(v);
  o.gemm_stack = cuda::env_flag("INFERA_CUDA_GEMM_STACK", o.gemm_stack);
  o.gemm_stack_qkv16 = cuda::env_flag("INFERA_CUDA_GEMM_STACK_QKV16", o.gemm_stack_qkv16);
  o.gemm_stack_qkv_one = cuda::env_flag("INFERA_CUDA_GEMM_STACK_QKV_ONE", o.gemm_stack_qkv_one);
  o.gemm_stack_attention16 =
      cuda::env_flag("INFERA_CUDA_GEMM_STACK_ATTN16", o.gemm_stack_attention16);
  if (const char* v = std::getenv("INFERA_CUDA_PERSISTENT_BLOCKS"); v && *v)
    o.residual_mlp_blocks = std::max(0, std::atoi(v));
  o.residual_mlp_carveout =
      cuda::env_flag("INFERA_CUDA_PERSISTENT_CARVEOUT", o.residual_mlp_carveout);
  if (const char* v = std::getenv("INFERA_CUDA_PERSISTENT_CHUNK"); v && *v)
    o.residual_mlp_chunk = std::max(0, std::atoi(v)) / 16 * 16;
  o.residual_mlp_lsu = cuda::env_flag("INFERA_CUDA_PERSISTENT_LSU", o.residual_mlp_lsu);
  if (const char* v = std::getenv("INFERA_CUDA_PERSISTENT_THREADS"); v && *v)
    o.residual_mlp_threads = std::atoi(v) == 512 ? 512 : 256;
  if (const char* v = std::getenv("INFERA_CUDA_GEMV_ROWS"); v && *v) o.gemv_max_rows = std::atoi(v);
  o.stream_gemm = cuda::env_flag("INFERA_CUDA_STREAM_GEMM", o.stream_gemm);
  if (const char* v = std::getenv("INFERA_CUDA_STREAM_GEMM_ROWS"); v && *v) {
    const char* colon = std::strchr(v, ':');
    o.stream_gemm_min_rows = colon ? std::atoll(v) : 0;
    o.stream_gemm_max_rows = std::atoll(colon ? colon + 1 : v);
  }
  o.skinny_gemm = cuda::env_flag("INFERA_CUDA_SKINNY", o.skinny_gemm);
  if (const char* v = std::getenv("INFERA_CUDA_SKINNY_ROWS"); v && *v)
    o.skinny_max_rows = std::atoi(v);
  if (const char* v = std::getenv("INFERA_CUDA_SKINNY_CTAS"); v && *v)
    o.skinny_ctas_per_sm = std::max(0, std::atoi(v));
  if (const char* v = std::getenv("INFERA_CUDA_SKINNY_WIDE_ROWS"); v && *v)
    o.skinny_wide_rows = std::max(0, std::atoi(v));
  if (const char* v = std::getenv("INFERA_CUDA_DECODE_SPLIT_KEYS"); v && *v)
    o.decode_split_keys = std::max(1, std::atoi(v));
  o.decode_staged = cuda::env_flag("INFERA_CUDA_DECODE_STAGED", o.decode_staged);
  o.decode_attention_shadow =
      cuda::env_flag("INFERA_CUDA_DECODE_SHADOW", o.decode_attention_shadow);
  o.paired_gemm = cuda::env_flag("INFERA_CUDA_PAIRED_GEMM", o.paired_gemm);
  if (const char* v = std::getenv("INFERA_CUDA_DECODE_STAGES"); v && *v)
    o.decode_stages = std::atoi(v);
  if (const char* v = std::getenv("INFERA_CUDA_DECODE_SPLITS"); v && *v)
    o.decode_splits = std::max(0, std::atoi(v));
  o.decode_mma = cuda::env_flag("INFERA_CUDA_DECODE_MMA", o.decode_mma);
  if (const char* v = std::getenv("INFERA_CUDA_DECODE_MMA_CONFIG"); v && *v)
    o.decode_mma_config = std::max(0, std::atoi(v));
  return o;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return make_cuda_backend(device, cuda_options_from_env());
}

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaOptions& options) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count)
    throw Error("CUDA device " + std::to_string(device) + " is not available (" +
                std::to_string(count) + " visible)");
  return std::make_unique<cuda::CudaBackend>(device, options);
}

std::string cuda_profile_report(Backend& backend) {
  if (auto* c = dynamic_cast<cuda::CudaBackend*>(&backend)) return c->profile_report();
  return "";
}

void cuda_profiler_range(bool start) {
  cuda::check_cuda(start ? cudaProfilerStart() : cudaProfilerStop(),
                   start ? "cudaProfilerStart" : "cudaProfilerStop");
}

std::optional<CudaStats> cuda_stats(const Backend& backend) {
  if (const auto* c = dynamic_cast<const cuda::CudaBackend*>(&backend)) return c->stats();
  return std::nullopt;
}

}  // namespace infera
