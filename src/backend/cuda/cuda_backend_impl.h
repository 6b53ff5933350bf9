// The CUDA backend's class, shared by its two source files: cuda_backend.cpp (memory, batches,
// the RoPE table) and cuda_ops.cpp (each op's checks and launch records).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_context.h"
#include "ops/backend.h"

namespace infera::cuda {

inline ElemType elem_type(DType t) {
  return t == DType::F32 ? ElemType::F32 : t == DType::F16 ? ElemType::F16 : ElemType::BF16;
}

// Index fields of a batch, in the order UploadedBatch::fields lists them.
enum BatchField : int { kTokens, kPositions, kSlots, kQueryStart, kSeqLens, kBlockTable, kRows };
constexpr int kBatchFields = 7;

// A batch whose tensors live in one device buffer; ops find it again by a tensor's address and
// check their indices against their own operands with the extremes computed once at upload (a
// batch may be uploaded without BatchDesc::validate).
struct UploadedBatch {
  const BatchDesc* desc = nullptr;
  const void* buffer = nullptr;
  const void* fields[kBatchFields] = {};
  int64_t counts[kBatchFields] = {};
  int32_t min[kBatchFields] = {}, max[kBatchFields] = {};
  // Block ids the sequences use for one block size, computed on first use: [min, max], and
  // whether every sequence's length fits its row of the block table.
  mutable int64_t checked_block_size = 0;
  mutable int32_t block_min = 0, block_max = -1;
  mutable bool tables_fit = true;
  // Whether every row's position is its offset in its sequence: -1 until first asked (the packed
  // wgmma attention's RoPE inside assumes it).
  mutable int8_t positions_are_offsets = -1;
};

// Throws InvalidArgument naming `op` unless every block id the batch's sequences use (for this
// pool's block size) lies inside the pool and every sequence fits its block-table row.
void expect_tables_fit(const UploadedBatch& u, const KvLayer& cache, const char* op);

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override;
  Device device() const override { return Device::CUDA; }
  bool supports(Op op, std::initializer_list<DType> dtypes) const override;

  Tensor alloc(const std::string& name, DType dtype, Shape shape) override;
  Tensor prepare_weight(const Tensor& host_weight) override;
  std::vector<Tensor> prepare_weights(std::span<const Tensor> host_weights) override;
  void to_host(const Tensor& src, std::span<float> dst) override;
  Batch upload_batch(const BatchDesc& desc) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, Tensor& out) override;
  void rope(Tensor& x, const Tensor& positions, double theta) override;
  void kv_write(const Tensor& k, const Tensor& v, KvLayer& cache, const Batch& batch) override;
  void attention(const Tensor& q, const KvLayer& cache, const Batch& batch,
                 const AttentionParams& params, Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) override;
  // Fused ops (cuda_fused_ops.cpp).
  void add_rmsnorm(Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                   Tensor& out) override;
  void matmul_multi(const Tensor& x, std::span<const Tensor* const> ws,
                    std::span<Tensor* const> outs) override;
  void matmul_swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate,
                     Tensor& up) override;
  void matmul_swiglu_down(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                          const Tensor& w_down, Tensor& gate, Tensor& up, Tensor& out) override;
  void qk_norm_rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm,
                             const Tensor& k_norm, float eps, double theta, KvLayer& cache,
                             const Batch& batch) override;
  void residual_mlp(Tensor& x, const Tensor& delta, const Tensor& mlp_norm, const Tensor& w_gate,
                    const Tensor& w_up, const Tensor& w_down, const Tensor& next_norm, float eps,
                    Tensor& xn, Tensor& gate, Tensor& up, Tensor& proj) override;
  void argmax_rows(const Tensor& x, std::span<int32_t> ids) override;
  // The batch-1 chain's fused ops (cuda_chain_ops.cpp; CudaOptions::b1_fused_chain).
  void rmsnorm_matmul_multi(const Tensor& x, const Tensor& norm, float eps, Tensor& xn,
                            std::span<const Tensor* const> ws,
                            std::span<Tensor* const> outs) override;
  void output_mlp(const Tensor& attn, const Tensor& w_o, Tensor& x, const Tensor& mlp_norm,
                  const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                  const Tensor& next_norm, std::span<const Tensor* const> next_ws,
                  std::span<Tensor* const> next_outs, float eps, Tensor& xn, Tensor& gate,
                  Tensor& up, Tensor& proj) override;
  // The whole decoder stack of one decode row as one kernel (cuda_decode_stack_ops.cpp;
  // CudaOptions::decode_stack).
  void encoder_stack(Tensor& x, std::span<const EncoderLayerRefs> layers, const Batch& batch,
                     const EncoderStackParams& params, const EncoderStackScratch& scratch) override;
  void decoder_stack(Tensor& x, std::span<const DecoderLayerRefs> layers, const Batch& batch,
                     const DecoderStackParams& params, const DecoderStackScratch& scratch) override;
  // Sampling (cuda_sampling_ops.cpp).
  void sample_rows(const Tensor& x, std::span<const RowSampling> rows,
                   std::span<SampledId> out) override;
  // Encoder ops (cuda_encoder_ops.cpp).
  void layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                 Tensor& out) override;
  void gelu(const Tensor& x, Tensor& out) override;
  void geglu(const Tensor& input, const Tensor& gate, Tensor& out) override;
  void add_bias(const Tensor& x, const Tensor& bias, Tensor& out) override;
  void attention_packed(const Tensor& q, const Tensor& k, const Tensor& v, const Batch& batch,
                        const AttentionParams& params, Tensor& out) override;
  void mean_pool(const Tensor& x, const Batch& batch, Tensor& out) override;
  void add_layernorm(Tensor& x, const Tensor& delta, const Tensor& weight, const Tensor& bias,
                     float eps, Tensor& out) override;
  void matmul_geglu(const Tensor& x, const Tensor& w_in, const Tensor& w_gate, Tensor& out,
                    Tensor& gate) override;
  void rope_attention_packed(Tensor& q, Tensor& k, const Tensor& v, const Batch& batch,
                             double theta, const AttentionParams& params, Tensor& out) override;
  OpStats op_stats() const override;
  void reset_op_stats() override;
  void synchronize() override;

  CudaStats stats() const;
  std::string profile_report();

 private:
  struct RopeTable {
    double theta = 0;
    int64_t head_dim = 0, positions = 0;
    Tensor cos, sin;  // device [positions, head_dim / 2]
  };
  const RopeTable& rope_table(double theta, int64_t head_dim, int32_t max_position);
  // rope's checks and launch arguments for x (op names the caller in errors).
  RopeArgs rope_args(Tensor& x, const Tensor& positions, double theta, const char* op);
  // attention_packed, after rotating q and k by rope (rope_attention_packed; nullptr: none): one
  // staging launch where the flash kernel runs (it also writes the bf16 k and v the flash kernel
  // reads, which attention_packed converts separately), else the two rope launches first.
  struct PackedRope {
    RopeArgs q, k;
  };
  // bf16: the encoder stack's hand-offs (cuda_encoder_stack_ops.cpp): q16 and k16 [T, heads, d]
  // as its GEMMs wrote them, rotated here (q scaled) in place of the staging, or inside the wgmma
  // kernel (CudaOptions::packed_rope_inside: q16 and k16 left as they are), v16 read as the
  // values and only out16 written, bf16 throughout; only where packed_flash16_applies.
  struct PackedBf16 {
    void *q16, *k16;
    const void* v16;
    void* out16;
  };
  void record_attention_packed(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Batch& batch, const AttentionParams& params, Tensor& out,
                               const PackedRope* rope, const char* op,
                               const PackedBf16* bf16 = nullptr);
  // Whether attention_packed of these tensors, for sequences of at most max_len rows, runs the
  // flash kernel.
  bool packed_flash_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            int64_t max_len) const;
  // Of those, whether it runs the wgmma kernel (CudaOptions::packed_wgmma).
  bool packed_wgmma_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            int64_t max_len) const;
  // And whether it can take the bf16 hand-offs as well (the wgmma kernel, or the flash kernel's
  // plain tile).
  bool packed_flash16_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              int64_t max_len) const;
  // The uploaded batch whose field `field` (-1: any field, stored in *found) is `t`; throws
  // InvalidArgument naming `op` when `t` is no index tensor made by upload_batch here.
  const UploadedBatch& find_batch(const Tensor& t, int field, const char* op,
                                  int* found = nullptr) const;
  // matmul's shape and device checks (InvalidArgument naming the tensors).
  void matmul_checks(const Tensor& x, const Tensor& w, const Tensor& out) const;
  // Records out = x . w^T; returns x's bf16 copy when it made or used one (nullptr otherwise),
  // which later matmuls of the same x may pass as `converted` to skip the conversion.
  const void* record_matmul(const Tensor& x, const Tensor& w, Tensor& out, int64_t n, int64_t k,
                            int64_t m, const void* converted = nullptr);
  // x [n, k] as bf16 for a tensor-core GEMM: `converted` when set, else x's bf16 shadow, else a
  // conversion recorded into scratch.
  // x (n x k, f32) as bf16: `converted`, else x's shadow, else one conversion recorded under
  // `as` (the op that needs it; "matmul" when none) with kernel name convert_bf16.
  const void* bf16_input(const Tensor& x, int64_t n, int64_t k, const void* converted = nullptr,
                         const OpNote* as = nullptr);
  // out_bf16 [n, m] = x_bf16 [n, k] . w^T (bf16 w), f32 accumulation rounded to bf16 (cuBLAS).
  void record_gemm_bf16_out(const void* x_bf16, const Tensor& w, void* out_bf16, int64_t n,
                            int64_t k, int64_t m, const OpNote& nt);
  // out_bf16 + i stride_out [n, m] = x_bf16 [n, k] . (w + i stride_w)^T for i < count (bf16
  // weights and outputs, strides in elements): one strided-batched cuBLAS launch.
  void record_gemm_strided_bf16(const void* x_bf16, const void* w, void* out_bf16, int64_t n,
                                int64_t k, int64_t m, int64_t count, int64_t stride_w,
                                int64_t stride_out, const OpNote& nt);
  // CudaOptions::paired_gemm: out0 = x . w0^T and out1 = x . w1^T (same-shape bf16 weights,
  // x_bf16 [n, k]) as one strided-batched launch; false (nothing recorded) where the switch is
  // off, the shapes differ, or the weights' or outputs' distance does not fit a stride.
  bool record_gemm_pair(const void* x_bf16, const Tensor& w0, const Tensor& w1, void* out0,
                        void* out1, ElemType out_type, int64_t n, int64_t k, const OpNote& nt);
  // matmul_swiglu's bf16 GLU path (CudaOptions::glu_bf16_gemm) applies: bf16 gate/up weights of
  // one shape, past the GEMV.
  bool glu_bf16_applies(const Tensor& w_gate, const Tensor& w_up, int64_t n) const;
  // Records the gate and up GEMMs with bf16 outputs (in `up`'s memory) and the SwiGLU over them,
  // writing the result as f32 to out_f32 and/or as bf16 to out_bf16 (either may be nullptr).
  // geglu: GeGLU instead, w_gate then being the input half (gelu(x . w_gate^T) * (x . w_up^T)).
  // x_bf16: x's bf16 copy when the caller has one (else bf16_input's).
  void record_glu_bf16(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                       const Tensor& gate, Tensor& up, float* out_f32, void* out_bf16,
                       const char* op, bool geglu = false, const void* x_bf16 = nullptr);
  // The same product as ONE launch of the GLU GEMM (glu_gemm.cu), the gated unit in its epilogue
  // and nothing in `up`: where CudaOptions::glu_gemm is on, n >= glu_gemm_min_rows and the kernel
  // takes the shapes. False (nothing recorded) elsewhere.
  bool record_glu_gemm(const void* x_bf16, int64_t n, int64_t k, const Tensor& w_gate,
                       const Tensor& w_up, float* out_f32, void* out_bf16, bool geglu,
                       const OpNote& nt);
  // The GEMM stack's q/k/v GEMM (w_qkv: q's, k's and v's rows one after another) and the
  // qk-norm / RoPE / KV write of `qa` (with its bf16 queries out) as ONE launch of qkv_gemm.cu,
  // where CudaOptions::qkv_gemm is on and the kernel takes the shapes. False (nothing recorded)
  // elsewhere.
  bool record_qkv_gemm(const void* x_bf16, const Tensor& w_qkv, int64_t k,
                       const QkNormRopeKvArgs& qa, const OpNote& nt);
  // out [n, m] (= or +=, accumulate) x_bf16 [n, k] . w^T with bf16 w, f32 accumulation, out F32
  // or BF16 (cuBLAS).
  void record_gemm_bf16_in(const void* x_bf16, const Tensor& w, void* out, ElemType out_type,
                           bool accumulate, int64_t n, int64_t k, const OpNote& nt);
  // qk_norm_rope_kv_write's checks and launch arguments.
  QkNormRopeKvArgs qk_norm_rope_kv_args(Tensor& q, Tensor& k, const Tensor& v,
                                        const Tensor& q_norm, const Tensor& k_norm, float eps,
                                        double theta, KvLayer& cache, const Batch& batch);
  // decoder_stack for the rows where cuBLAS runs the GEMMs (cuda_gemm_stack_ops.cpp;
  // CudaOptions::gemm_stack); false (nothing recorded) where it does not apply.
  bool record_gemm_stack(Tensor& x, std::span<const DecoderLayerRefs> layers, const Batch& batch,
                         const DecoderStackParams& p, const DecoderStackScratch& s);
  // encoder_stack past the GEMV and stream GEMM rows with bf16 weights
  // (cuda_encoder_stack_ops.cpp; CudaOptions::encoder_stack); false (nothing recorded) where it
  // does not apply.
  bool record_encoder_stack(Tensor& x, std::span<const EncoderLayerRefs> layers,
                            const Batch& batch, const EncoderStackParams& p,
                            const EncoderStackScratch& s);
  // LayerNorm of x [n, d] (f32) written only as bf16 to out16 (the in-register kernel).
  void record_layernorm_bf16(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                             void* out16, const char* op);
  // Whether attention() takes the wgmma prefill kernel for q, out and cache with `vectors`
  // query vectors per (sequence, kv head) at most.
  bool flash_wgmma_applies(const Tensor& q, const Tensor& out, const KvLayer& cache,
                           int64_t vectors) const;
  // Whether the TMA kernel (CudaOptions::flash_tma) takes the wgmma kernel's launch `a` (its
  // tile shape chosen).
  bool tma_attention_applies(const AttentionArgs& a, const BatchDesc& d) const;
  // Set by record_gemm_stack around its attention() call: where the wgmma kernel runs for q, it
  // reads the queries from q16 (when set) and writes out only as bf16 (bf16_out_only), and
  // `taken` says it did.
  struct StackAttention {
    const float* q = nullptr;
    const void* q16 = nullptr;
    bool bf16_out_only = false;
    bool taken = false;
  };
  StackAttention stack_attention_;
  // RMSNorm of x [n, d] (f32) times w written only as bf16 to out16 (add_rmsnorm's kernel).
  void record_norm_bf16(const Tensor& x, const Tensor& w, float eps, void* out16, const char* op);
  Tensor device_tensor(const std::string& name, DType dtype, Shape shape);
  // The kTune* bits (kernels.h) of the decode-chain switches in options_.
  int64_t decode_tune() const {
    return (options_.pdl_early_trigger >= 1 ? kTuneEarlyTrigger : 0) |
           (options_.pdl_early_trigger >= 2 ? kTuneGemvEarlyTrigger : 0) |
           (options_.gemv_preload ? kTuneGemvPreload : 0) |
           (options_.decode_kv_prefetch ? kTuneKvPrefetch : 0) |
           (options_.params_early ? kTuneParamsEarly : 0) |
           (options_.residual_mlp && options_.residual_mlp_carveout ? kTuneMaxSharedCarveout : 0);
  }
  // Records x . w^T for every weight through the skinny tensor-core GEMM (skinny_gemm.cu) as one
  // launch, or with glu = kSkinnySwiglu (ws = {gate, up}) silu(x . gate^T) * (x . up^T) into
  // outs[0] (kSkinnyGeglu: gelu(x . ws[0]^T) * (x . ws[1]^T)), 0: plain GEMMs; returns
  // false, recording nothing, where it does not apply (CudaOptions::skinny_gemm off, rows outside
  // (gemv_max_rows, skinny_max_rows], non-bf16 weights, k % 8 != 0, unaligned): then cuBLAS.
  bool record_skinny(const Tensor& x, std::span<const Tensor* const> ws,
                     std::span<Tensor* const> outs, int64_t glu, const char* op);
  // Records x . ws[i]^T into outs[i] for up to three weights through stream_gemm.cuh in one
  // launch (x converted to bf16 once unless its shadow is there), or with glu (ws = {gate, up})
  // silu(x . gate^T) * (x . up^T) into outs[0] and its bf16 shadow; false, recording nothing,
  // where it does not apply (CudaOptions::stream_gemm off, rows outside its range, non-bf16
  // weights, exact_f32, k % 8 != 0, glu past 128 rows, not compute capability 9.0).
  bool record_stream(const Tensor& x, std::span<const Tensor* const> ws,
                     std::span<Tensor* const> outs, bool glu, const char* op);
  // Records out16 = gelu(x16 . w_in^T) * (x16 . w_gate^T) as bf16 only, one stream GEMM launch
  // (bf16 x16 [n, k]); false, recording nothing, where the kernel does not take it (rows past
  // 128, non-bf16 weights, k % 8 != 0, unaligned, not compute capability 9.0).
  bool record_stream_geglu16(const void* x16, int64_t n, int64_t k, const Tensor& w_in,
                             const Tensor& w_gate, void* out16, const char* op);
  bool stream_gemm_rows(int64_t n) const {  // n in the stream GEMM's row range (when it is on)
    const int64_t lo = options_.stream_gemm_min_rows > 0 ? options_.stream_gemm_min_rows
                                                         : options_.gemv_max_rows + 1;
    return options_.stream_gemm && n >= lo && n <= options_.stream_gemm_max_rows;
  }

  // bf16 shadows (CudaOptions::bf16_shadow). An op whose f32 output is a prefill-sized GEMM input
  // (add_rmsnorm's out, swiglu's, the flash attention's, ...) asks shadow_buffer(out) for a bf16
  // buffer, passes it to its kernel, which writes out's values rounded to bf16 there too, and
  // then publish_shadow()s it. record_matmul uses it for x instead of converting x, but only when
  // it is the very next op recorded (no op in between can have changed out) and x is exactly out.
  struct Bf16Shadow {
    const void* f32 = nullptr;
    int64_t numel = 0;
    const void* bf16 = nullptr;
    uint64_t record = 0;  // ctx_->records_appended() right after the producing op
  };
  void* shadow_buffer(const Tensor& out);  // nullptr: no shadow for this output
  void publish_shadow(const Tensor& out, const void* bf16);
  const void* take_shadow(const Tensor& x, int64_t numel);  // nullptr: convert x
  Bf16Shadow shadow_;
  int64_t shadow_uses_ = 0;
  int64_t paired_gemms_ = 0;
  // residual_mlp: co-resident blocks per (shared memory bytes, norm type), asked once each.
  std::map<std::pair<int64_t, int64_t>, int64_t> residual_mlp_fit_;
  int64_t residual_mlp_kernels_ = 0;  // launches recorded (CudaStats)
  // The b1 chain: whether the composition of these ops would run the plain GEMV for one row
  // (so that the fused GEMVs compute the same), and the GemvArgs of out[s] = x . ws[s]^T.
  bool b1_chain_on() const;
  GemvArgs chain_gemv(const Tensor& x, std::span<const Tensor* const> ws,
                      std::span<Tensor* const> outs, const char* op) const;
  int64_t fused_gemvs_ = 0;  // CudaStats::fused_gemvs
  // decoder_stack: co-resident blocks per (head_dim + 1024 x group, shared memory bytes), asked
  // once each; the layer tables uploaded so far (host copy -> device copy), reused while the model and cache
  // stay; launches recorded (CudaStats::decode_stack_kernels).
  std::map<std::pair<int64_t, int64_t>, int64_t> decode_stack_fit_;
  std::vector<std::pair<std::vector<const void*>, Tensor>> decode_stack_tables_;
  int64_t decode_stack_kernels_ = 0, decode_stack_ring_ = 0;  // CudaStats::decode_stack_ring
  int64_t encoder_stacks_ = 0;  // record_encoder_stack's stacks (CudaStats::encoder_stacks)
  int64_t packed_wgmma_ = 0, packed_rope_inside_ = 0;  // CudaStats::packed_wgmma, ...rope_inside
  int64_t encoder_stream_glu_ = 0;                       // CudaStats::encoder_stream_glu
  int64_t tma_attentions_ = 0;                           // CudaStats::tma_attentions
  int64_t tma_queries_ = 0;                              // CudaStats::tma_queries
  int64_t glu_gemms_ = 0;                                // CudaStats::glu_gemms
  int64_t qkv_gemms_ = 0;                                // CudaStats::qkv_gemms
  int64_t residual_gemms_ = 0;                           // CudaStats::residual_gemms
  int64_t gemm_stack_qkv_one_ = 0;  // CudaStats::gemm_stack_qkv_one
  int64_t gemm_stacks_ = 0;  // record_gemm_stack's stacks (CudaStats::gemm_stacks)
  Tensor decode_stack_trace_;  // CudaOptions::decode_stack_trace's device buffer
  void write_decode_stack_trace();

  // CudaOptions::fuse_qk_attention: qk_norm_rope_kv_write records nothing and leaves its launch
  // here; attention() takes it into the staged decode kernel (AttentionArgs::fused_qk) when it is
  // the very next op on the same q and cache, and any other record or flush records it first
  // (DeviceContext::set_before_record), so the order of effects is unchanged.
  void record_pending_qk();
  std::optional<QkNormRopeKvArgs> pending_qk_;
  OpNote pending_qk_note_;

  CudaOptions options_;
  std::shared_ptr<DeviceContext> ctx_;
  std::shared_ptr<std::vector<UploadedBatch>> batches_;  // live uploads (shared with deleters)
  std::shared_ptr<struct BatchBufferPool> batch_pool_;
  std::vector<RopeTable> rope_tables_;
  // Key tiles of attention_packed; the tile sizes are known before the first call (the op
  // harness asks), the query tile is that of the last call (it follows the GQA group).
  OpStats stats_{.packed_key_tiles = 0,
                 .packed_query_tile = 32,
                 .packed_key_tile = kPackedKeys,
                 .decode_matmul = {},
                 .decode_attention = {}};
  std::vector<unsigned long long> keys_;  // argmax_rows' keys read back
  std::vector<SampleOut> sampled_;        // sample_rows' choices read back
};

}  // namespace infera::cuda
