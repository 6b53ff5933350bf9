// The launch records of the CUDA kernels: one argument struct per kernel family and the function
// that launches it on a stream. Host code (cuda_ops.cpp) validates an op, fills the struct and
// hands it to the device context, which launches it eagerly or inside a CUDA graph. The struct's
// bytes are the graph cache's key, so each one holds only 8-byte members (pointers, int64_t,
// double): no padding, and equal bytes mean equal launches. Indices inside the structs have been
// checked on the host; kernels trust them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace infera::cuda {

enum class ElemType : int64_t { F32 = 0, F16 = 1, BF16 = 2 };

using LaunchFn = void (*)(const void* args, cudaStream_t stream);

// Whether the decode-path kernels launch with programmatic dependent launch (device_util.cuh's
// launch_pdl): process-wide, set by the backend from CudaOptions::programmatic_launch.
void set_programmatic_launch(bool on);
bool programmatic_launch();
// Launches from this thread skip PDL while set (DeviceContext sets it around the launches of a
// step recorded with set_step_pdl(false)): programmatic_launch() then says no.
void set_thread_pdl_suppressed(bool suppressed);

// Batch-1 decode-chain switches, bits of the `tune` member of the launch structs that carry one
// (filled by the backend from CudaOptions):
// kTuneEarlyTrigger: the small PDL kernels of the chain (add_rmsnorm, qk-norm/RoPE/KV write,
//   staged decode attention) call pdl_trigger() when they start, before their pdl_wait(), so the
//   next kernel's blocks become resident and start their pre-wait work (the GEMV's weights) while
//   this one still runs; kTuneGemvEarlyTrigger: the GEMV too. Safe: every kernel's pdl_wait()
//   waits for its predecessor's completion, which waited for its own.
// kTuneGemvPreload: the GEMV loads the first round of its weight rows into registers before its
//   pdl_wait() (the whole row up to k = 2048 in bf16), not only an L2 prefetch.
// kTuneKvPrefetch: the staged decode attention prefetches its keys and values into L2 before its
//   pdl_wait() (positions and block tables are uploaded before the step's first kernel).
constexpr int64_t kTuneEarlyTrigger = 1;
constexpr int64_t kTuneGemvPreload = 2;
constexpr int64_t kTuneKvPrefetch = 4;
constexpr int64_t kTuneGemvEarlyTrigger = 8;
// kTuneParamsEarly: add_rmsnorm and the qk-norm/RoPE/KV kernel read their constant parameters
//   (norm weights, RoPE table, the batch's slots and positions) before their pdl_wait().
constexpr int64_t kTuneParamsEarly = 16;
// kTuneMaxSharedCarveout: the batch-1 GEMV prefers the largest shared-memory carveout, as the
//   residual-MLP kernel (residual_mlp.cu) does: an SM changes its L1/shared split only when idle,
//   so kernels of different carveouts cannot overlap under PDL (the next kernel's blocks would
//   wait for the SM to drain instead of starting their weight loads beside the running one).
constexpr int64_t kTuneMaxSharedCarveout = 32;

// out[i, :] = table[ids[i], :] widened to f32.
struct EmbeddingArgs {
  const void* table;
  const int32_t* ids;
  float* out;
  int64_t n, dim;
  ElemType type;
};
void launch_embedding(const void* args, cudaStream_t stream);

// Row-wise RMSNorm, one warp per row; out may alias x.
struct RmsNormArgs {
  const float* x;
  const void* weight;
  float* out;
  int64_t rows, dim;
  ElemType weight_type;
  double eps;
};
void launch_rmsnorm(const void* args, cudaStream_t stream);

// Rotate-half RoPE in place over x [n, heads, head_dim] from a cos/sin table [positions, half].
struct RopeArgs {
  float* x;
  const int32_t* positions;
  const float* cos;
  const float* sin;
  int64_t n, heads, head_dim;
};
void launch_rope(const void* args, cudaStream_t stream);
// rope_attention_packed's staging (one launch): q [n, hq, d] and k [n, hkv, d] rotated in place
// (RopeArgs' tables and positions), k's and v's bf16 copies written to k_bf16 and v_bf16 for the
// flash kernel. rope_stage_applies: d / 2 divides 256 and 32-bit indices suffice.
struct RopeStageArgs {
  float* q;
  float* k;
  const float* v;
  void* k_bf16;
  void* v_bf16;
  const int32_t* positions;
  const float* cos;
  const float* sin;
  int64_t n, hq, hkv, head_dim;
};
bool rope_stage_applies(const RopeStageArgs& args);
void launch_rope_stage(const void* args, cudaStream_t stream);
// The encoder stack's staging (cuda_encoder_stack_ops.cpp): the q/k/v GEMMs wrote bf16 q and k
// [n, heads, d]; both are rotated in place (RopeArgs' tables and positions), q also multiplied by
// q_scale (the flash kernel's score scale, so that it reads q as the bf16 it would stage) before
// its rounding. rope_stage16_applies: d % 4 == 0, d / 4 divides 256, 32-bit indices suffice.
struct RopeStage16Args {
  void* q16;
  void* k16;
  const int32_t* positions;
  const float* cos;
  const float* sin;
  int64_t n, heads, head_dim;
  float q_scale;
};
bool rope_stage16_applies(const RopeStage16Args& args);
void launch_rope_stage16(const void* args, cudaStream_t stream);

// out = silu(gate) * up (elementwise) or out = a + b. swiglu (and GeGLU, below) also write
// out's values rounded to bf16 into out_bf16 when it is set: the next GEMM's tensor-core input
// (see CudaBackend::Bf16Shadow), instead of a separate conversion pass over out.
struct BinaryArgs {
  const float* a;
  const float* b;
  float* out;
  int64_t count;
  void* out_bf16 = nullptr;
};
void launch_swiglu(const void* args, cudaStream_t stream);
void launch_add(const void* args, cudaStream_t stream);

// out = silu(gate) * up from bf16 gate and up (matmul_swiglu's prefill GEMMs write bf16), f32
// math; out_bf16 as in BinaryArgs. out may be nullptr (only the bf16 result: matmul_swiglu_down).
struct SwigluBf16Args {
  const void* gate;
  const void* up;
  float* out;
  int64_t count;
  void* out_bf16 = nullptr;
};
void launch_swiglu_bf16(const void* args, cudaStream_t stream);
// The same for GeGLU (matmul_geglu): out = gelu(gate) * up, i.e. `gate` holds the input half and
// `up` the gate half of ModernBERT's Wi.
void launch_geglu_bf16(const void* args, cudaStream_t stream);

// dst[i, :] = src[rows[i], :].
struct GatherRowsArgs {
  const float* src;
  const int32_t* rows;
  float* dst;
  int64_t count, width;
};
void launch_gather_rows(const void* args, cudaStream_t stream);

// Rows of k and v [n, kv_heads, head_dim] (f32) to their cache slots in the block pools
// [kv_heads, blocks, block_size, head_dim], converted to the pool's type.
struct KvWriteArgs {
  const float* k;
  const float* v;
  const int32_t* slots;
  void* key_pool;
  void* value_pool;
  ElemType type;
  int64_t n, kv_heads, block_size, head_dim;
  int64_t num_blocks;  // of the pools
};
void launch_kv_write(const void* args, cudaStream_t stream);

// Fused kernels (fused.cu). Residual add + RMSNorm: x += delta (in place); out = rmsnorm(x).
// delta == nullptr: x is only normed (not written); out == nullptr: only out_bf16 is written
// (both need the one-block-per-row path: dim % 4 == 0, dim <= 16384, 16-byte aligned rows).
struct AddRmsNormArgs {
  float* x;
  const float* delta;
  const void* weight;
  float* out;
  int64_t rows, dim;
  ElemType weight_type;
  double eps;
  void* out_bf16 = nullptr;  // when set: out rounded to bf16 as well (BinaryArgs::out_bf16)
  int64_t tune = 0;          // kTune* bits
};
void launch_add_rmsnorm(const void* args, cudaStream_t stream);

// Per-head RMSNorm + RoPE of q [n, hq, d] and k [n, hkv, d] in place, then k and v [n, hkv, d]
// to the pools at slots (as KvWriteArgs).
struct QkNormRopeKvArgs {
  float* q;
  float* k;
  const float* v;
  const void* q_norm;
  const void* k_norm;
  ElemType norm_type;
  const int32_t* positions;
  const float* cos;
  const float* sin;  // tables [positions, d / 2]
  const int32_t* slots;
  void* key_pool;
  void* value_pool;
  ElemType cache_type;
  int64_t n, hq, hkv, head_dim, block_size;
  int64_t num_blocks;  // of the pools [hkv, num_blocks, block_size, head_dim]
  double eps;
  // 1: one block per token, each warp 4 heads of q, k or v, the token's RoPE row and the norm
  // weights loaded before the PDL wait (CudaOptions::qk_norm_by_token); where the shape allows.
  int64_t by_token = 0;
  int64_t tune;  // kTune* bits
  // The decoder stack's prefill path (cuda_gemm_stack_ops.cpp): q, k and v read as bf16 [n, hq,
  // d] / [n, hkv, d] (the GEMMs' bf16 outputs) instead of from q, k, v; normed q still written
  // to q (f32). k == nullptr: the rotated k is written to the key pool only. bf16 inputs take
  // their own one-block-per-token kernel (qk_norm_bf16_kernel_applies).
  const void* q16 = nullptr;
  const void* k16 = nullptr;
  const void* v16 = nullptr;
  // Elements from one token's q16 / k16 / v16 row to the next (0: hq x head_dim for q, hkv x
  // head_dim for k and v): q, k and v as column ranges of one GEMM's [n, (hq + 2 hkv) d] output.
  int64_t qkv16_row = 0;
  // When set: the rotated q times q16_scale rounded to bf16, written here instead of to q (the
  // wgmma prefill attention's bf16 queries, AttentionArgs::q16, [n, hq, d]; may be q16 itself
  // where qkv16_row is 0: each lane rewrites only the elements it read).
  void* q16_out = nullptr;
  double q16_scale = 0;
};
void launch_qk_norm_rope_kv(const void* args, cudaStream_t stream);
// Whether launch_qk_norm_rope_kv takes its one-block-per-token kernel for these arguments, and
// whether it can take bf16 inputs (q16, k16, v16: head_dim 128 or 256, bf16 cache).
bool qk_norm_token_kernel_applies(const QkNormRopeKvArgs& a);
bool qk_norm_bf16_kernel_applies(const QkNormRopeKvArgs& a);

// Per row r of x [rows, width]: keys[r] = 0 when no value is above -inf, else the argmax (ties:
// the lowest index) as a 64-bit key whose low word is 0xffffffff - index (see fused.cu).
struct ArgmaxArgs {
  const float* x;
  unsigned long long* keys;
  int64_t rows, width;
};
void launch_argmax_rows(const void* args, cudaStream_t stream);

// Sampling per row (sampling.cu): one block per row of x [rows, width]; params [rows] and out
// [rows] live on the device (the params are re-uploaded before every launch, so a captured step
// replays with the new rows' filters and uniform numbers).
struct SampleParams {  // as RowSampling (ops/backend.h), 24 bytes
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  double uniform;
};
struct SampleOut {  // as SampledId
  int32_t id, drew;
};
struct SampleRowsArgs {
  const float* x;
  const SampleParams* params;
  SampleOut* out;
  int64_t rows, width;
};
void launch_sample_rows(const void* args, cudaStream_t stream);

// Encoder kernels (encoder.cu). LayerNorm per row; bias may be null (no bias).
struct LayerNormArgs {
  const float* x;
  const void* weight;
  const void* bias;
  float* out;
  int64_t rows, dim;
  ElemType weight_type;
  double eps;
  void* out_bf16 = nullptr;  // when set: out rounded to bf16 as well (BinaryArgs::out_bf16)
  // the row held in registers where it fits (layernorm_rows_kernel); only that kernel takes a
  // null out (out_bf16 set: the bf16 row alone, for the encoder stack's next GEMM)
  int64_t in_registers = 0;
  // add_layernorm: when set, the row normed is x + delta, and that sum is written back to x
  // (sum_out == x); only the in-register kernel does this (the caller checks it applies).
  const float* delta = nullptr;
  float* sum_out = nullptr;
};
void launch_layernorm(const void* args, cudaStream_t stream);
// Whether the in-register LayerNorm kernel takes these arguments (dim % 4 == 0, at most 16384
// wide, 16-byte aligned rows; with delta, sum_out == x): add_layernorm needs it.
bool layernorm_rows_apply(const LayerNormArgs& args);
// BinaryArgs: out = gelu(a) (b null) or gelu(a) * b (GeGLU), erf form.
void launch_gelu(const void* args, cudaStream_t stream);
// out[i, :] = x[i, :] + bias[:].
struct AddBiasArgs {
  const float* x;
  const void* bias;
  float* out;
  int64_t rows, width;
  ElemType type;
};
void launch_add_bias(const void* args, cudaStream_t stream);
// out[s, :] = mean of rows [query_start[s], query_start[s + 1]) of x.
struct MeanPoolArgs {
  const float* x;
  const int32_t* query_start;
  float* out;
  int64_t seqs, width;
};
void launch_mean_pool(const void* args, cudaStream_t stream);
// Packed encoder attention (Backend::attention_packed): grid (tiles, sequences, kv heads), tiles
// of query_tile rows (query_tile x group <= 32 query vectors), key tiles of kPackedKeys.
constexpr int64_t kPackedKeys = 32, kPackedMaxHeadDim = 256;
struct PackedAttentionArgs {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  const int32_t* query_start;
  int64_t num_seqs, tiles, query_tile, hq, hkv, head_dim;
  double scale;
  int64_t causal, window;
  int64_t pipelined;  // decode kernel: next round's loads in flight (CudaOptions::decode_pipeline)
  int64_t dense;      // visit every key tile of the sequence (the window still masks per row)
  void* out_bf16;     // tensor-core kernel, when set: out rounded to bf16 as well
};
int64_t packed_attention_smem_bytes(int64_t head_dim);
void launch_packed_attention(const void* args, cudaStream_t stream);
// The bf16 tensor-core variant (encoder_attention_mma.cu): hq == hkv, head_dim % 16 == 0 and
// <= kPackedMmaMaxHeadDim; 64-row query tiles, 64-key tiles.
constexpr int64_t kPackedMmaMaxHeadDim = 128, kPackedMmaRows = 64, kPackedMmaKeys = 64;
int64_t packed_attention_mma_smem_bytes(int64_t head_dim);
void launch_packed_attention_mma(const void* args, cudaStream_t stream);

// f32 -> f16/bf16 (round to nearest even), for the tensor-core GEMM's activations.
struct ConvertArgs {
  const float* src;
  void* dst;
  ElemType type;
  int64_t count;
};
void launch_convert(const void* args, cudaStream_t stream);

// out[n, m] = x[n, k] . w[m, k]^T with f32 activations and accumulation.
//   gemv: n <= kGemvMaxRows; each warp streams whole weight rows (16-byte loads) once for all n
//   rows of x, so small batches read the weights at close to memory bandwidth.
//   gemm_simt: tiled CUDA-core GEMM for any n (f16 weights, and the exact-f32 mode).
constexpr int64_t kGemvMaxRows = 8;
struct MatmulArgs {
  const float* x;
  const void* w;
  float* out;
  ElemType weight_type;
  int64_t n, k, m;
  int64_t tune = 0;  // kTune* bits (the GEMV path)
};
// Q8_0 / Q4_0 weights (raw ggml blocks, k a multiple of 32), dequantized inside the kernel
// (quant_matmul.cu).
struct QuantMatmulArgs {
  const float* x;
  const void* w;
  float* out;
  int64_t n, k, m;
  int64_t q4;  // 0: Q8_0, 1: Q4_0
};
void launch_quant_matmul(const void* args, cudaStream_t stream);
void launch_gemv(const void* args, cudaStream_t stream);
void launch_gemm_simt(const void* args, cudaStream_t stream);
// The GEMV over up to kGemvMaxSegments weights that share x and k, in one launch: out[s] =
// x . w[s]^T ([n, m[s]]); with swiglu = 1 (segments == 2, m[0] == m[1]): out[0] =
// silu(x . w[0]^T) * (x . w[1]^T), out[1] untouched unless the weights are unaligned (then it
// holds x . w[1]^T).
constexpr int kGemvMaxSegments = 3;
struct GemvArgs {
  const float* x;
  const void* w[kGemvMaxSegments];
  float* out[kGemvMaxSegments];
  int64_t m[kGemvMaxSegments];
  int64_t segments, swiglu;
  ElemType weight_type;
  int64_t n, k;
  int64_t tune;  // kTune* bits
  // The batch-1 decode chain's fusions (gemv_fusion_applies; all null/0: none).
  // norm set: x is normalized first, as rmsnorm(x, norm, eps) computes it (norm bf16 [k]; every
  //   warp sums x's squares in the order of the one-block norm kernels, so the same bits), and
  //   norm_out (when set) receives the normalized row (the first warp writes it).
  // residual = 1: out[s] += x . w[s]^T (the residual add in the epilogue; out must not alias x).
  const void* norm;
  float* norm_out;
  double eps;
  int64_t residual;
};
// Whether launch_gemv_multi takes a's norm / residual fusions: one x row, bf16 weights (and
// norm), k % 8 == 0, 16-byte aligned x and weights; with a norm k <= 4096 (the norm kernels'
// one-float4-per-thread shape, whose summation order the GEMV reproduces).
bool gemv_fusion_applies(const GemvArgs& a);
void launch_gemv_multi(const void* args, cudaStream_t stream);

// Decode-batch GEMM on bf16 tensor cores (skinny_gemm.cu) for the batches past the GEMV: bf16 x
// [n, k] (a bf16 shadow or converted) and up to kGemvMaxSegments bf16 weights sharing it, f32
// out; with glu = kSkinnySwiglu (segments == 2, m[0] == m[1]) out[0] = silu(x . w[0]^T) *
// (x . w[1]^T) and out[1] untouched, with glu = kSkinnyGeglu GeGLU (out[0] = gelu(x . w[0]^T) *
// (x . w[1]^T), matmul_geglu), glu = 0 plain GEMMs; out_bf16 (when set) receives out[0] rounded
// to bf16. k is split over `splits` CTAs of a cluster (set by skinny_gemm_layout).
constexpr int64_t kSkinnySwiglu = 1, kSkinnyGeglu = 2;
struct SkinnyGemmArgs {
  const void* x;
  const void* w[kGemvMaxSegments];
  float* out[kGemvMaxSegments];
  int64_t m[kGemvMaxSegments];
  int64_t segments, glu;
  int64_t n, k;
  void* out_bf16;
  int64_t splits;
  int64_t bn;  // x rows per CTA, 64 or 128
};
// k % 8 == 0, 16-byte aligned x and weights, 1-3 segments (a gated unit: 2 of equal m).
bool skinny_gemm_supports(const SkinnyGemmArgs& a);
// Chooses a.bn (128 past wide_rows rows) and a.splits (about ctas_per_sm CTAs per SM of the
// sm_count, 0: no split); returns the grid's CTAs.
int64_t skinny_gemm_layout(SkinnyGemmArgs& a, int64_t sm_count, int64_t ctas_per_sm,
                           int64_t wide_rows);
void launch_skinny_gemm(const void* args, cudaStream_t stream);

// Grouped-query attention over the paged cache (see Backend::attention). Work items are
// (sequence, kv head, tile of "query vectors"): the sequence's rows x the q heads sharing the kv
// head, row-major, so one tile reads each key and value of its kv head once for all its queries.
struct AttentionArgs {
  const float* q;  // [T, hq, head_dim]
  float* out;      // [T, hq, head_dim]
  const void* keys;
  const void* values;  // pools [hkv, num_blocks, block_size, head_dim]
  ElemType type;
  const int32_t* positions;    // [T]
  const int32_t* query_start;  // [B + 1]
  const int32_t* seq_lens;     // [B]
  const int32_t* block_table;  // [B, max_blocks]
  int64_t num_tokens, num_seqs, max_blocks, hq, hkv, head_dim, block_size;
  int64_t num_blocks;        // of the pools
  int64_t tiles;             // tiles of query vectors per (sequence, kv head)
  int64_t vectors_per_tile;  // query vectors per tile (the simt kernel; the mma kernel uses 64)
  int64_t splits;            // key ranges per tile (> 1: partial results, then a combine pass)
  float* partial_out;        // [splits, T, hq, head_dim] when splits > 1
  float* partial_ml;         // [splits, T, hq, 2]: running max and sum
  unsigned* split_counters;  // [B, hkv, tiles], zero between launches: splits done per tile
  int64_t split_key_tiles;   // flash kernel with splits > 1: key tiles per chunk of a query tile
  double scale;
  int64_t causal, window;
  int64_t pipelined;  // decode kernel: next round's loads in flight (CudaOptions::decode_pipeline)
  int64_t stages;     // staged decode kernel: shared-memory stages per warp (3, 4 or 6); TMA
                      // prefill kernel: K / V stages (2 or 3)
  // Flash kernel: key tiles every row of a warp sees whole skip the mask, and the softmax runs
  // in base 2 with log2(e) folded into the query scale (CudaOptions::flash_fast_softmax).
  int64_t fast_softmax;
  // Flash kernel with fast_softmax: the interleaved tile (CudaOptions::flash_interleaved).
  int64_t interleaved;
  // Flash and staged decode kernels, when set: out rounded to bf16 as well (BinaryArgs::out_bf16).
  void* out_bf16;
  int64_t tune;  // staged decode kernel: kTune* bits
  // Staged decode kernel, one query row per sequence, when fused_qk = 1: the step's
  // qk_norm_rope_kv_write (bf16 norm weights, head_dim 64/128) done inside this launch instead
  // of its own kernel (CudaOptions::fuse_qk_attention). q and k hold the projections on entry;
  // each block normalizes and rotates its q heads itself, the block whose keys include the new
  // position writes the new key and value to the pools (and k in place) before reading them,
  // and the block that finishes (sequence, kv head) last writes the rotated q heads back.
  int64_t fused_qk;
  QkNormRopeKvArgs qk;
  // Wide flash kernel (vectors_per_tile = kFlashWideVectors): warps a block, 4 (32 rows each) or
  // 8 (16 rows each).
  int64_t wide_warps;
  // wgmma prefill kernel and the flash kernel (not split, not interleaved), when set: the queries
  // as bf16 [T, hq, head_dim], already times the kernel's score scale (base 2 where
  // fast_softmax: QkNormRopeKvArgs::q16_out, RopeStage16Args::q_scale), read instead of q; bf16
  // caches only. And out may be nullptr there when out_bf16 is set (the GEMM decoder and encoder
  // stacks read only that).
  const void* q16 = nullptr;
};
// CUDA cores, f32 throughout: any cache type and head_dim <= kSimtMaxHeadDim; decode's path.
constexpr int64_t kSimtMaxHeadDim = 512;
int64_t attention_simt_smem_bytes(int64_t vectors_per_tile, int64_t head_dim);
void launch_attention_simt(const void* args, cudaStream_t stream);
// Decode: at most kDecodeMaxVectors query vectors per (sequence, kv head); every warp on its own
// keys, one 16-byte load per lane per key row (head_dim / (16 / element size) a power of two
// <= 32, 16-byte aligned pools). Grid (1, sequences, kv heads x splits); f32 arithmetic.
constexpr int64_t kDecodeMaxVectors = 4;
bool attention_decode_supports(ElemType type, int64_t head_dim);
void launch_attention_decode(const void* args, cudaStream_t stream);
// The same work with each warp's keys and values streamed through `stages` shared-memory stages
// of 8 keys by cp.async (f16/bf16 caches, head_dim 64 or 128; CudaOptions::decode_staged).
bool attention_decode_staged_supports(ElemType type, int64_t head_dim);
int attention_decode_staged_blocks_per_sm(int64_t head_dim, int64_t vectors, int64_t stages);
// Key splits for `tiles` (sequence, kv head) pairs of up to `capacity` keys on `slots` resident
// blocks: fewest waves x longest block, splits of at least min_keys keys, at most max_splits.
int64_t plan_decode_staged_splits(int64_t tiles, int64_t capacity, int64_t slots, int64_t min_keys,
                                  int64_t max_splits);
void launch_attention_decode_staged(const void* args, cudaStream_t stream);
// Tensor cores (mma.sync, f16/bf16 operands, f32 accumulation): 64 query vectors per tile, for
// f16/bf16 caches and head_dim in {16, 32, 64, 128}; prefill's path.
constexpr int64_t kMmaVectorsPerTile = 64;
bool attention_mma_supports(ElemType type, int64_t head_dim);
void launch_attention_mma(const void* args, cudaStream_t stream);
// The same tiles (64 query vectors) pipelined: cp.async double-buffered key/value tiles, ldmatrix
// fragments, longest tiles first. head_dim 64 or 128, f16/bf16; grid (kv heads, sequences,
// tiles), so tiles <= 65535; q 16-byte aligned.
bool attention_flash_supports(ElemType type, int64_t head_dim);
int64_t attention_flash_blocks_per_sm(int64_t head_dim);  // resident blocks (launch bounds)
void launch_attention_flash(const void* args, cudaStream_t stream);
// The same kernel with 128-vector query tiles (attention_flash_wide.cu, CudaOptions::flash_wide):
// fast_softmax only, same head dims and types; AttentionArgs::wide_warps 4 or 8; 2 blocks an SM.
constexpr int64_t kFlashWideVectors = 128;
constexpr int64_t kFlashWideBlocksPerSm = 2;
void launch_attention_flash_wide(const void* args, cudaStream_t stream);
// The 64-vector tiles with each 64-key tile's halves on different warps (8 warps a block, 2 blocks
// an SM; attention_flash_halves.cu, CudaOptions::flash_key_halves): fast_softmax only, no split
// (splits must be 1), same head dims and types.
void launch_attention_flash_halves(const void* args, cudaStream_t stream);

}  // namespace infera::cuda
