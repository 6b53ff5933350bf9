// The CUDA backend (Hopper first): F32 activations in device memory, weights uploaded once at
// load, kernels per op family, cuBLAS for large bf16/f32 GEMMs, repeated steps replayed as CUDA
// graphs. Frontends get it through backend/registry.h; tests may build one with options.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "ops/backend.h"

namespace infera {

struct CudaOptions {
  bool graphs = true;         // replay repeated steps as CUDA graphs (INFERA_CUDA_GRAPHS=0: off)
  bool sync_each_op = false;  // synchronise after every kernel to name a faulting op
                              // (INFERA_CUDA_SYNC=1; implies no graphs)
  // Every product in f32 on CUDA cores: matmuls of more than gemv_max_rows rows through the tiled
  // f32 GEMM instead of bf16 tensor cores, attention through the f32 kernel. For parity tests
  // (INFERA_CUDA_EXACT=1); slower.
  bool exact_f32 = false;
  bool mma_attention = true;  // tensor-core attention for f16/bf16 caches (INFERA_CUDA_MMA=0: off)
  // Of the tensor-core kernels, the pipelined one (cp.async, ldmatrix) for head_dim 64 and 128
  // (INFERA_CUDA_FLASH=0: the unpipelined attention_mma kernel).
  bool flash_attention = true;
  // The flash kernel skips the causal/window mask on key tiles every row of a warp sees whole,
  // and runs its softmax in base 2 (log2(e) folded into the query scale): fewer non-tensor-core
  // instructions per score (INFERA_CUDA_FLASH_FAST=0: every tile masked, base e).
  bool flash_fast_softmax = true;
  // Causal prefill whose longest query tiles would form the flash kernel's tail (few sequences x
  // kv heads: one 2048-token prompt) has those tiles' keys split across blocks and merged by the
  // last one (INFERA_CUDA_FLASH_SPLIT=1). Off: on the H200 it ran the 2048-token prompt's
  // attention at 174 us a layer against 127 unsplit (the blocks' prologues, partials and merges
  // cost more than the tail, which was ~13% of resident warps; bench/reference/cudaf_h200).
  bool flash_split_keys = false;
  // The flash kernel's interleaved tile: independent consecutive mma, fragments loaded a step
  // ahead, tree reductions in the softmax (INFERA_CUDA_FLASH_INTERLEAVED=1). Off: ncu put it at
  // x1.06-1.12 per call, but end to end on the H200 (session 6's lead run, 3 alternating rounds,
  // bench/reference/lead6_h200) prefill 8x512 ran 236k tok/s with it against 256k with the earlier
  // tile and 1x2048 193k against 199k.
  bool flash_interleaved = false;
  // Paged (decoder) prefill attention with 128-vector query tiles (attention_flash_wide.cu):
  // 4 = 4 warps of 32 rows, 8 = 8 warps of 16 rows, 0 = the 64-vector flash kernel
  // (INFERA_CUDA_FLASH_WIDE=0/4/8; 1 means 4). Needs flash_fast_softmax. The split of long query
  // tiles (flash_split_keys) applies to it as to the 64-vector kernel. The encoders' packed
  // attention keeps the 64-vector kernel.
  int64_t flash_wide = 0;
  // Where flash_wide is 0: many-sequence prefill takes the 8-warp wide kernel (no split) when its
  // grid has at least 3 blocks per SM and no sequence has more than 1024 query rows; else the
  // key-halves / 64-vector kernels (INFERA_CUDA_FLASH_WIDE_AUTO=0: never). On the H200 (cudapre
  // run 1, 3 alternating rounds, INFERA_CUDA_FLASH_WIDE=8 against the defaults): 8x512 x1.035
  // (512 blocks), but 1x512 x0.90 (64 blocks) and 1x2048 x0.97 (long rows: the key halves win).
  bool flash_wide_auto = true;
  // Paged prefill attention with each 64-key tile's two halves on different warps of a block of
  // 8 (attention_flash_halves.cu): half the serial walk of a long query tile, 16 warps an SM
  // (INFERA_CUDA_FLASH_HALVES=0: the 64-vector kernel of 4 warps). Needs flash_fast_softmax;
  // takes precedence over flash_split_keys and flash_interleaved, flash_wide over it. On the H200
  // (bench/reference/cudafa/run2, ncu per layer): 2048-token prompt 126.9 -> 105.1 us, 8x512
  // 101.7 -> 95.6 us; step_bench against main, 3 alternating rounds: 1x2048 x1.02 / x1.09 / x1.08,
  // 8x512 x0.95 / x1.01 / x1.03, 1x512 x0.97 / x1.06 / x1.07.
  bool flash_key_halves = true;
  // Paged prefill attention on Hopper's warpgroup MMA (attention_flash_wgmma.cu): blocks of 2
  // warpgroups, S = Q K^T and O += P V by wgmma from swizzled shared memory
  // (INFERA_CUDA_FLASH_WGMMA=0: the mma.sync kernels below). Needs flash_fast_softmax, an sm_90
  // device, f16/bf16, head_dim 64/128, a power-of-two block size and a kv head's pool plane
  // within int32 elements; takes precedence over flash_wide, flash_wide_auto and
  // flash_key_halves. On the H200 (bench/reference/fa3_h200/run3, ncu per launch): 1x2048
  // 107.6 -> 85.1 us a layer, 8x512 80.8 (wide8) -> 74.7, 1x512 26.7 -> 21.3; step_bench against
  // the switch off, 3 alternating rounds: 1x2048 x1.07 / x1.10 / x1.09, 8x512 x1.01 / x1.03 /
  // x1.02, 1x512 x0.96 / x1.08 / x0.99 (first-token ids).
  bool flash_wgmma = true;
  // Its query vectors a block: 0 = 128 (a warpgroup each 64) where that fills 2 blocks an SM,
  // else 64 (both warpgroups on them, each 64-key tile's halves split between the two); 64 or
  // 128 force one (INFERA_CUDA_FLASH_WGMMA_VECTORS).
  int64_t flash_wgmma_vectors = 0;
  // The 64-vector (split) tiles' loop pipelined within each warpgroup: S of key tile i and P V
  // of tile i - 1 in flight together, tile i's softmax under P V (FlashAttention-3's
  // intra-warpgroup overlap; INFERA_CUDA_FLASH_WGMMA_PIPELINE=1). The 128-vector tiles are
  // unchanged (a second S accumulator does not fit their 128 registers). Off: not measured
  // faster where it runs (bench/reference/fa3b_h200/run2, ncu per launch: 1x512 21.5 -> 20.3 us,
  // 1x2048 81.8 -> 82.3; step_bench 1x512 x1.03 / x1.02 / x1.00, 1x2048 x1.01 / x1.00 / x1.00).
  bool flash_wgmma_pipeline = false;
  // The wgmma kernel's queries loaded at the block's start, all of a thread's loads at once, so
  // that they are in flight while the block computes its key ranges and issues its first K/V
  // tile (INFERA_CUDA_FLASH_WGMMA_Q_PREFETCH=0: staged after the first tile's copies, 4 loads at
  // a time). Bit for bit the same outputs. ncu per launch (bench/reference/pf8_h200/run1):
  // 8x512 73.3 -> 63.0 us, 1x2048 81.7 -> 73.1, 1x512 21.5 -> 17.4.
  bool flash_wgmma_q_prefetch = true;
  // Where flash_wgmma runs and the longest prompt has flash_tma_min_rows rows or more (or half
  // that, with (kv head, sequence, 128-vector tile) work items for every SM twice): the TMA kernel
  // instead (attention_tma_wgmma.cu: a producer warpgroup copies 128-key K/V
  // tiles with TMA, 2 consumer warpgroups of 64 query vectors, S of a tile and P V of the one
  // before in flight together; head_dim 128, blocks of 8..128 keys; INFERA_CUDA_FLASH_TMA=0 off,
  // INFERA_CUDA_FLASH_TMA_MIN_ROWS=n). On an H100 (bench/reference/lead23_h200/run5, ncu per
  // launch): 1x2048 74.5 -> 62.5 us, step_bench prefill 1x2048 x1.08-1.09; 8x512 slower (85 us,
  // step x0.93: a block's walk of <= 4 key tiles does not repay its prologue at one block an SM),
  // hence a threshold, then on the longest prompt (from 512 rows: 1x512 x0.94, 8x512 x0.92-0.93;
  // run7). With the queries by TMA and the persistent grid below, 8x512 is faster on it too
  // (x1.014-1.083 against HEAD's kernels; bench/reference/lead24_h200/run4), while prompts whose
  // items leave SMs idle are not (1x512 x0.978-0.999 in run 3; 2x512, 4x256, 16x128 level or
  // x0.97-0.99 in run 4), hence the second way in.
  bool flash_tma = true;
  int64_t flash_tma_min_rows = 1024;
  // K/V stages, 2 or 3 (INFERA_CUDA_FLASH_TMA_STAGES; 3: level at 1x2048, x0.99).
  int64_t flash_tma_stages = 2;
  // Its two consumer warpgroups take turns at issuing their products, one's softmax under the
  // other's products (FlashAttention-3's ping-pong; INFERA_CUDA_FLASH_TMA_PINGPONG=1). Off: on an
  // H100 1x2048 62.8 -> 61.9 us a launch, step_bench level (x0.99-1.01; lead23_h200/run7).
  bool flash_tma_pingpong = false;
  // Its producer copies the queries too, with TMA, where the GEMM stack hands them over as scaled
  // bf16 (AttentionArgs::q16) and the group is 1, 2, 4 or 8 (INFERA_CUDA_FLASH_TMA_QUERIES=0:
  // the consumers stage them). On an H100 (bench/reference/lead24_h200): 1x2048 62.1-62.8 ->
  // 49.5-50.0 us a launch (ncu, run 4), step_bench 1x2048 x1.036-1.045, 4x1024 x1.070-1.074,
  // 2x2048 x1.028-1.069 (run 3).
  bool flash_tma_queries = true;
  // Its grid at most one block an SM, each walking several work items in a snake order (longest
  // first, every other round backwards), so that an item's first copies overlap the previous
  // item's end (INFERA_CUDA_FLASH_TMA_PERSISTENT=0: a block an item). On top of the queries:
  // 1x2048 -> 47.6-48.2 us a launch (run 4), step_bench x1.049-1.062 against x1.036-1.045, 4x1024
  // x1.074-1.085 against x1.070-1.074 (run 3). Striding through the items instead of the snake
  // left the first blocks the longest item of every round: x0.96-1.00 (run 2).
  bool flash_tma_persistent = true;
  // ... its blocks at most (0: the SMs'; tests set a few, so that each block walks many items).
  int64_t flash_tma_max_blocks = 0;
  // The same kernel for the encoders' packed attention (INFERA_CUDA_PACKED_FLASH_HALVES=1). Off:
  // encoder_bench ModernBERT-large 10x512 13.87 -> 14.10 ms, 64x512 89.08 -> 88.24 ms (one run
  // each, run 2): not measured faster.
  bool packed_flash_halves = false;
  // The encoders' packed attention on the wgmma prefill kernel above (attention_packed_wgmma.cu:
  // keys and values are the sequence's own bf16 rows, the windowed schedule; its tile shape as
  // flash_wgmma_vectors chooses it) where flash_wgmma applies, instead of the mma.sync flash
  // kernel (INFERA_CUDA_PACKED_WGMMA=0: that one). Takes precedence over packed_flash_halves.
  // encoder_bench ModernBERT-large on the H200, 3 alternating rounds (bench/reference/enc_h200/
  // run2): one local layer's attention x1.13-1.18, the forward x1.03-1.08 (1x93 1.13 -> 1.05 ms,
  // 64x512 56.6 -> 54.0 ms), faster in every round and shape.
  bool packed_wgmma = true;
  // Where the encoder stack's attention runs on it (head_dim 64, not the pipelined loop, the
  // batch's positions its rows' offsets): the queries and keys rotated inside the kernel (RoPE
  // as they are staged) instead of by the staging launch before it, one launch a layer fewer;
  // the same bits (INFERA_CUDA_PACKED_ROPE_INSIDE=0: the staging launch).
  bool packed_rope_inside = true;
  // rope_attention_packed where the flash kernel runs: one staging launch rotates q and k and
  // writes the bf16 k and v the kernel reads (INFERA_CUDA_ROPE_STAGE=0: rope, rope, then the two
  // conversions, four launches; same bits).
  bool rope_stage = true;
  // Key tiles (64 keys) per chunk of a split query tile; 0: chosen from the batch's shape
  // (INFERA_CUDA_FLASH_SPLIT_TILES, for measuring the choice).
  int64_t flash_split_key_tiles = 0;
  // Prefill-sized matmul inputs made by add_rmsnorm, swiglu, GeGLU, layernorm and the tensor-core
  // attentions are also written as bf16 by the kernel that makes them, so the next GEMM reads
  // them without a conversion pass (INFERA_CUDA_BF16_SHADOW=0: a convert kernel before each GEMM).
  // Same bits either way: the shadow is the f32 value rounded as the conversion rounds it.
  bool bf16_shadow = true;
  // matmul_swiglu past the GEMV with bf16 weights: the gate and up GEMMs write bf16 (into `up`'s
  // memory, which the op contract leaves to the backend) and the SwiGLU kernel reads them, instead
  // of two f32 GEMM outputs read back in f32: half the bytes on both sides. One more rounding
  // (of x . w to bf16) before silu(g) * u; op harness NMSE 1.5e-5 against 4.8e-6 (bound 1e-4).
  // INFERA_CUDA_GLU_BF16=0: f32 GEMM outputs and the f32 swiglu.
  // qk_norm_rope_kv_write with one block per token, 4 heads per warp, the token's RoPE row and
  // the norm weights read before the PDL wait; the same arithmetic per head
  // (INFERA_CUDA_QKNORM_TOKEN=0: one warp per head). Measured together on the H200 (cudapf runs
  // 2 and 3, bench/reference/cudapf, 3 interleaved rounds each against main): prefill 1x2048
  // x1.06-1.12, 8x512 x1.06-1.21, 1x512 x1.05-1.09, decode unchanged; ncu per 8x512 step:
  // qk_norm 1.66 -> 1.02 ms, swiglu 1.26 -> 1.01 ms, gate/up GEMMs about 2.36 -> 2.12 ms.
  bool glu_bf16_gemm = true;
  bool qk_norm_by_token = true;
  // matmul_swiglu_down on the glu_bf16_gemm path: the SwiGLU kernel writes its result only as
  // bf16 (into the gate scratch) for the down projection's GEMM, not also as f32 (which nothing
  // reads): at 8x512 50 of the kernel's 125 MB a layer. Same bits as matmul_swiglu + matmul
  // (the down GEMM read the bf16 shadow of the same values). INFERA_CUDA_MLP_BF16_ONLY=0: off.
  bool mlp_bf16_only = true;
  // On that path, gate/up and the gated unit as ONE kernel of our own (glu_gemm.cu on
  // tma_gemm.cuh's persistent TMA + wgmma GEMM: a stage holds both weights' rows, act(a) * b in
  // the epilogue, bf16 and / or f32 out) instead of a cuBLAS pair and the SwiGLU / GeGLU kernel:
  // the pass over two bf16 [n, f] products and a launch a layer go. From glu_gemm_min_rows rows;
  // compute capability 9.0; numerics: act on the f32 accumulators (the cuBLAS path rounds both
  // products to bf16 first).
  // OFF until measured on a GPU (written in session 25 without one): INFERA_CUDA_GLU_GEMM=1 on,
  // INFERA_CUDA_GLU_GEMM_ROWS=n, INFERA_CUDA_GLU_GEMM_TILE=64|128 (output columns a tile; else
  // 128 where the tiles fill every SM, 64 otherwise).
  bool glu_gemm = false;
  int64_t glu_gemm_min_rows = 1;
  int64_t glu_gemm_tile_cols = 0;
  // The GEMM stack's q/k/v GEMM and its qk-norm / RoPE / KV-cache write as ONE kernel of our own
  // (qkv_gemm.cu on tma_gemm.cuh's kernel: a tile 128 rows of one head, the per-head norm,
  // rotation and the writes of bf16 queries, keys and values in the epilogue, on the f32 sums)
  // where q/k/v run as one GEMM (gemm_stack_qkv_one), the attention takes bf16 queries
  // (gemm_stack_attention16), head_dim 128 and a bf16 cache; compute capability 9.0. The GEMM's
  // bf16 [n, (hq + 2 hkv) 128] output and the qk-norm launch go. OFF until measured on a GPU
  // (written in session 25 without one): INFERA_CUDA_QKV_GEMM=1.
  bool qkv_gemm = false;
  // The stacks' residual GEMMs (the decoder's o and down, the encoder's o and Wo projections: x +=
  // . W^T into the f32 residual stream, cuBLAS's beta-1 GEMM) on the same kernel of our own
  // (residual_gemm.cu), from residual_gemm_min_rows rows; compute capability 9.0. OFF until
  // measured on a GPU (written in session 25 without one): INFERA_CUDA_RESIDUAL_GEMM=1,
  // INFERA_CUDA_RESIDUAL_GEMM_ROWS=n, INFERA_CUDA_RESIDUAL_GEMM_TILE=128|256 (output columns a
  // tile; else 256 where those tiles cover every SM twice, 128 otherwise).
  bool residual_gemm = false;
  int64_t residual_gemm_min_rows = 1;
  int64_t residual_gemm_tile_cols = 0;
  // Those three kernels on the ping-pong schedule (tma_gemm.cuh): each consumer warpgroup a whole
  // tile of at most 128 weight rows (the GLU's 64 output columns, the residual's 128), the two
  // taking turns at their k loops so that one's epilogue runs under the other's products, where
  // by default both work on one tile and its epilogue runs under none
  // (INFERA_CUDA_TMA_GEMM_PINGPONG=1; off, unmeasured).
  bool tma_gemm_pingpong = false;
  // Decode attention (<= 4 query vectors per kv head) with every warp on its own keys
  // (INFERA_CUDA_DECODE_ATTENTION=0: the general f32 kernel instead).
  bool decode_attention = true;
  // Fewest keys per block of the decode attention when keys are split across blocks to fill
  // the GPU (INFERA_CUDA_DECODE_SPLIT_KEYS): fewer means more blocks, each a shorter chain.
  // 64: a block of 4 warps x 2 keys x 8 steps per round of loads; batch-1 decode ran 1.77 ms
  // per step against 2.2-2.3 ms with 128 on the H200 (bench/reference/cuda3_h200/run2).
  int64_t decode_split_keys = 64;
  // Decode attention with the next round of key/value loads issued before the current round's
  // arithmetic (INFERA_CUDA_DECODE_PIPELINE=0: rounds of 8 loads, then the arithmetic).
  bool decode_pipeline = true;
  // Decode attention through shared memory (attention_decode_staged.cu): each warp streams its
  // keys and values with cp.async through decode_stages stages of 8 keys (3, 4 or 6); splits
  // planned from waves of resident blocks. ON by default (INFERA_CUDA_DECODE_STAGED=0: the
  // register kernel above; INFERA_CUDA_DECODE_STAGES; INFERA_CUDA_DECODE_SPLITS = a fixed split
  // count, 0 = planned): f16/bf16 caches, head_dim 64 and 128. H200 run 1
  // (bench/reference/cudaa_h200): with 4 stages and many splits it lost end to end; ncu per layer
  // at b256 unsplit: 3 stages (16 warps/SM) 156 us, 4 stages 175, 6 stages 208, old kernel 175.
  // With the defaults below (3 stages, splits only where a wave is not full), 3 alternating
  // rounds end to end (bench/reference/lead6_h200): greedy decode b64 20.0k vs 17.9k tok/s, b256
  // 31.2k vs 29.3k, b8 3.70k vs 3.62k.
  bool decode_staged = true;
  int64_t decode_stages = 3;
  int64_t decode_splits = 0;
  // Of those, the tensor-core kernel (attention_decode_mma.cu) where it applies (not exact_f32,
  // no fused qk-norm): S = Q K^T and O += P V by mma.sync over 32-key tiles that each warp
  // streams through its shared-memory stages, one block-table lookup per tile; q and P rounded
  // to the cache type, f32 softmax and accumulation (INFERA_CUDA_DECODE_MMA=0: the staged
  // kernel's f32 FMAs; OFF by default until an H200 run verifies it: INFERA_CUDA_DECODE_MMA=1). decode_mma_config picks its (warps, stages) shape for bf16 head_dim 128
  // (INFERA_CUDA_DECODE_MMA_CONFIG: 1 = 1x4, 2 = 2x2, 3 = 2x3, 4 = 4x2, 5 = 1x3, 6 = 2x4;
  // 0 = the default, 2x3). docs/notes/2026-12-03/issue-11-attn256.md has the H200 numbers.
  bool decode_mma = false;
  int64_t decode_mma_config = 0;
  // The staged decode attention also writes its output rounded to bf16 (the bf16 shadow, see
  // bf16_shadow) for the o projection's tensor-core GEMM, past gemv_max_rows rows: one
  // convert_bf16 launch (~2.6 us at b64) fewer per layer (INFERA_CUDA_DECODE_SHADOW=0: off).
  // Two bf16 GEMMs of the same shape on the same x past gemv_max_rows rows (k and v of
  // matmul_multi; gate and up of matmul_swiglu's bf16 path) as one strided-batched cuBLAS launch
  // (the stride is the distance between the weights, and between the outputs): at decode sizes
  // a cuBLAS GEMM costs ~4.5-7 us of GPU time whatever its size, a pair ~5-8 us
  // (INFERA_CUDA_PAIRED_GEMM=0: off). H200, 4 alternating rounds against main's binary
  // (bench/reference/cudabd/run2, docs/notes/2026-12-01/issue-11-cudabd.md): greedy decode b64
  // x1.094 with both (x1.080 pairs alone), b256 x1.034 (x1.027); b1 and b8 do not use them.
  bool decode_attention_shadow = true;
  bool paired_gemm = true;
  // The fused ops (add_rmsnorm, matmul_multi, matmul_swiglu, qk_norm_rope_kv_write) as single
  // kernels (INFERA_CUDA_FUSED=0: Backend's compositions of the one-op kernels).
  bool fused = true;
  // attention_packed visits every key tile of a sequence, masking the window per row, instead of
  // only the tiles the window reaches (INFERA_CUDA_PACKED_DENSE=1): same results, the baseline
  // against which the windowed schedule is measured.
  bool packed_dense = false;
  // attention_packed on bf16 tensor cores where it applies (no GQA, head_dim % 16 == 0, <= 128;
  // not in exact_f32 mode); INFERA_CUDA_PACKED_MMA=0: the f32 CUDA-core kernel everywhere.
  bool packed_mma = true;
  // Of those, head_dim 64 and 128 on the decoder's pipelined flash kernel (k and v converted to
  // bf16 first) instead of encoder_attention_mma.cu, under the windowed schedule
  // (INFERA_CUDA_PACKED_FLASH=0: encoder_attention_mma.cu).
  bool packed_flash = true;
  // layernorm with each row read once into registers with 16-byte loads (dim % 4 == 0, up to
  // 16384; INFERA_CUDA_LAYERNORM_REGISTERS=0: two strided passes over the row).
  bool layernorm_in_registers = true;
  int64_t gemv_max_rows = 8;  // matmuls of up to this many rows stream weights (GEMV), 0..8
  // bf16 matmuls of more than gemv_max_rows and at most skinny_max_rows rows (decode batches)
  // through skinny_gemm.cu's tensor-core kernel: weights read once per launch, q/k/v and gate/up
  // (with the SwiGLU epilogue) one launch each, PDL like the GEMV, split k over a thread-block
  // cluster. Off by default: on the H200 it is still slower than cuBLAS (decode b64 x0.92, b256
  // x0.81, bench/reference/cudag_h200; docs/notes/2026-11-30/issue-11-cudag.md says why).
  // INFERA_CUDA_SKINNY=1: on; INFERA_CUDA_SKINNY_ROWS: the row limit, 0..4096.
  bool skinny_gemm = false;
  int64_t skinny_max_rows = 256;
  // Its shape choices, for tuning (INFERA_CUDA_SKINNY_CTAS, INFERA_CUDA_SKINNY_WIDE_ROWS): k is
  // split across CTAs until about skinny_ctas_per_sm per SM run (0: never split); batches of more
  // than skinny_wide_rows rows take 128-row x tiles instead of 64.
  int64_t skinny_ctas_per_sm = 2;
  int64_t skinny_wide_rows = 64;
  // bf16 matmuls of stream_gemm_min_rows..stream_gemm_max_rows rows through stream_gemm.cuh's
  // weight-streaming kernel (TMA ring + wgmma with the weights as the M side, split k over a
  // cluster, deterministic): q/k/v in one launch, gate/up with the SwiGLU epilogue (and its bf16
  // copy for the down projection) in one, tried before the GEMV, the skinny GEMM and cuBLAS.
  // Compute capability 9.0 only. On for 4..32 rows, where the H200 measured it faster end to end
  // (decode b4 x1.03, b8 x1.28, b16 x1.08, b32 x1.08 against main; b64 x1.01, not clearly
  // faster, stays on cuBLAS, as b1 x0.75, b2 x0.86 stay on the GEMV and b256 x0.88 on cuBLAS;
  // bench/reference/sgemm_h200, docs/notes/2026-12-01/issue-11-sgemm.md). x is rounded to bf16
  // (as cuBLAS's path does from 9 rows; the GEMV reads it as f32). INFERA_CUDA_STREAM_GEMM=0:
  // off; INFERA_CUDA_STREAM_GEMM_ROWS=lo:hi (or hi alone, lo then past the GEMV), lo <= hi,
  // 1 <= hi <= 256, lo 0: past the GEMV.
  bool stream_gemm = true;
  int64_t stream_gemm_min_rows = 4;
  int64_t stream_gemm_max_rows = 32;
  bool profile = false;  // time each kernel with events, eagerly (INFERA_CUDA_PROFILE=1)
  // Decode-path kernels launch with programmatic dependent launch: each starts while its
  // predecessor finishes and streams its weights into L2 before waiting for it
  // (INFERA_CUDA_PDL=0: plain launches). Process-wide: the last backend made sets it.
  bool programmatic_launch = true;
  // Steps of more than this many tokens launch every kernel plainly, without PDL
  // (INFERA_CUDA_PDL_MAX_TOKENS=N; -1, the default: no limit, PDL in every step as before). The
  // idea: a PDL kernel after a cuBLAS GEMM may have its blocks resident and parked at their wait
  // while the GEMM's later waves still need the SMs. Not measured faster (cudapre run 2, 3 rounds,
  // 256 against -1: prefill 1x2048 x0.96-1.03, 8x512 x1.00-1.11; ModernBERT-large 64x512
  // x0.94 / x0.99 in 2 rounds), so off. The graph's device time equals its kernels' sum anyway
  // (run 2: events around the graph launch 7.1 ms at 1x2048, ncu 7.36): the wall's excess over it
  // was host time (BatchDesc::validate, see docs/notes/2026-12-01/issue-11-cudapre.md).
  int64_t pdl_max_step_tokens = -1;
  // Batch-1 decode chain (kernels.h kTune*; docs/notes/2026-11-30/issue-11-cudab1.md; H200 runs
  // under bench/reference/cudab1_h200, b1 greedy decode, Qwen3-0.6B shape, ctx 512).
  // The GEMV (1..2 rows, bf16 weights) loads its first round of weight rows into registers
  // before its PDL wait, so each GEMV's weights stream while the kernel before it runs
  // (INFERA_CUDA_GEMV_PRELOAD=0: only the L2 prefetch). Against main's binary, same runs: run 1
  // x1.03 / x1.05, run 2 x1.08 / x1.04, run 3 x1.01-x1.06 in 6 ABBA pairs (median step 1.149 vs
  // 1.200 ms); against PRELOAD=0 in the same binary x1.01 (run 2), x1.03 (run 3).
  bool gemv_preload = true;
  // PDL kernels trigger their successor when they start instead of after their wait
  // (INFERA_CUDA_PDL_EARLY=1: add_rmsnorm, qk-norm/RoPE/KV, staged decode attention; 2: the GEMV
  // as well). Off: slower (2: 1.28-1.31 ms/step against 1.08-1.14, run 1; 1: 1.07 against 1.04,
  // run 2): blocks parked at their wait crowd the running kernel's.
  int64_t pdl_early_trigger = 0;
  // The staged decode attention prefetches its keys and values into L2 before its wait
  // (INFERA_CUDA_KV_PREFETCH=1). Off: no gain measured (run 2: 1.050 against 1.044 ms).
  bool decode_kv_prefetch = false;
  // add_rmsnorm and the qk-norm/RoPE/KV kernel read their norm weights (and RoPE table) before
  // their wait (INFERA_CUDA_PARAMS_EARLY=1). Off: within the noise (runs 2-3).
  bool params_early = false;
  // The qk-norm/RoPE/KV-write kernel folded into the staged decode attention when a decode step
  // has one query row per sequence (bf16 norms, head_dim 64/128, 3 stages): one launch fewer per
  // layer (INFERA_CUDA_FUSE_QK=1; AttentionArgs::fused_qk says how). Off: 201 instead of 229
  // kernels and 1222 instead of 1308 us of kernel time per b1 step (ncu), but the steps were not
  // faster end to end (run 3: median 1.160 against 1.149 ms).
  bool fuse_qk_attention = false;
  // Backend::residual_mlp (attention residual + norm, gate/up + SiLU, down + residual, the next
  // layer's norm) for one decode row with bf16 weights as one kernel (residual_mlp.cu): each block
  // requests its whole slice of the three weights into shared memory (bulk copies) before its PDL
  // wait, a grid-wide arrival counter separates gate/up from down, the last block to finish does
  // the next norm (INFERA_CUDA_PERSISTENT=1: on). OFF: not faster on the H200 (cudamk runs 2-3,
  // docs/notes/2026-12-01/issue-11-cudamk.md): ~16 us a launch in ncu against ~17 us for the
  // four kernels it replaces, b1 decode level with main (x0.99-1.02).
  // residual_mlp_blocks: the grid (0: one block per SM; at most the co-resident count), for tests
  // of uneven slices (INFERA_CUDA_PERSISTENT_BLOCKS).
  // residual_mlp_carveout: the batch-1 GEMVs prefer the largest shared-memory carveout, as the
  // kernel does, so that it could start beside them under PDL (kernels.h kTuneMaxSharedCarveout;
  // INFERA_CUDA_PERSISTENT_CARVEOUT=1). Off: b1 x0.94-0.97 with it (run 2). residual_mlp_chunk:
  // bytes per bulk copy, 0 = one per weight slice (INFERA_CUDA_PERSISTENT_CHUNK).
  // residual_mlp_lsu: cp.async by every thread instead of bulk copies
  // (INFERA_CUDA_PERSISTENT_LSU=1); residual_mlp_threads: 256 or 512 per block
  // (INFERA_CUDA_PERSISTENT_THREADS).
  bool residual_mlp = false;
  int64_t residual_mlp_blocks = 0;
  // The batch-1 decode chain without its add_rmsnorm kernels (Backend::output_mlp and
  // rmsnorm_matmul_multi for one row, bf16 weights and norms, hidden size <= 4096 and % 8 == 0):
  // the o and down projections' GEMVs add into the residual in their epilogue, the q/k/v and
  // gate/up GEMVs compute the norm of x in their prologue (every warp, in the norm kernel's
  // summation order: the same bits as the composition). 6 launches a layer instead of 8
  // (INFERA_CUDA_B1_FUSE=1: on). Not with INFERA_CUDA_PERSISTENT (that kernel takes the MLP half
  // then). OFF until measured on the H200 (docs/notes/2026-12-03/issue-11-b1fuse.md says why).
  bool b1_fused_chain = false;
  // One decode row of one sequence through the whole decoder stack as ONE kernel
  // (Backend::decoder_stack, decode_stack.cu): a block per SM, grid barriers between the phases
  // of each layer, every warp loading its rows of the next phase's weights before the barrier in
  // front of it. bf16 weights and cache, head_dim 16/32/64/128, hidden <= 1024, q width <= 2048,
  // intermediate <= 3072, GQA group <= 4 (Qwen3-0.6B's shape); anything else the composition
  // (INFERA_CUDA_DECODE_STACK=0: off). On the H200 b1 decode x1.22 at context 512
  // (docs/notes/2026-12-03/session-12-lead.md).
  bool decode_stack = true;
  // Its attention splits per kv head, 0 = SMs / kv heads (INFERA_CUDA_DECODE_STACK_SPLITS).
  // decode_stack_smem: every weight row through a ring in shared memory, copied (TMA) by a
  // producer warp of its own as far ahead as the ring has room, where a phase's rows fit
  // (INFERA_CUDA_DECODE_STACK_SMEM=1; off: through registers, each phase's rows loaded a barrier
  // ahead). The same bits; off because b1 measured x0.91-0.98 on an H100 (contexts 512, 2048),
  // smaller rings faster: the copies in flight lengthen the L2 round trips of the phases' chain
  // (bench/reference/lead18_h200/).
  int64_t decode_stack_splits = 0;
  bool decode_stack_smem = false;
  // The ring's size in KiB, 0 = as large as a block's shared memory allows
  // (INFERA_CUDA_DECODE_STACK_RING_KIB; smaller than a phase needs: the registers path).
  int64_t decode_stack_ring_kib = 0;
  // Registers path: every warp requests its rows of the layer's later weights (o, gate/up, down)
  // and of the next layer's q/k/v into L2 at the layer's start (prefetch.global.L2), so HBM
  // streams them during the latency-bound phases (INFERA_CUDA_DECODE_STACK_L2=1: on). Off: b1
  // x0.88-0.91 on the H200 (contexts 512, 2048), the q/k/v phase's work 2.8 -> 6.3 us queued
  // behind the layer's other requests (bench/reference/lead15_h200/run1_results).
  bool decode_stack_l2 = false;
  // The decoder stack where cuBLAS runs the GEMMs (prefill, batched decode past the stream
  // GEMM's rows; bf16 weights): the o and down projections add into the residual in the GEMM
  // (beta 1) and the norms after them write only the bf16 input of the next GEMMs, so the f32
  // projection, the f32 normed x and the add_rmsnorm pass over them are never made
  // (INFERA_CUDA_GEMM_STACK=0: the composition of the fused ops). gemm_stack_qkv16: its q/k/v
  // GEMMs write bf16, which the qk-norm/RoPE kernel reads (k goes to the cache only): q, k and
  // v rounded to bf16 before the norm, as a bf16 model computes them
  // (INFERA_CUDA_GEMM_STACK_QKV16=0: f32 as the composition).
  // gemm_stack_attention16 (with qkv16, where the wgmma prefill attention runs): the qk-norm
  // kernel writes q as the scaled bf16 that attention would round it to (the same bits) and the
  // attention writes only its bf16 output (INFERA_CUDA_GEMM_STACK_ATTN16=0: f32 q and output).
  bool gemm_stack = true;
  bool gemm_stack_qkv16 = true;
  // With gemm_stack_qkv16, a layer whose q, k and v weights lie one after another (as the
  // Qwen3 loader places them through Backend::prepare_weights) runs them as ONE cuBLAS GEMM of
  // their rows together, instead of q's GEMM and the k/v pair: at decode batches of 64 a launch
  // costs ~5 us whatever its size (INFERA_CUDA_GEMM_STACK_QKV_ONE=0: the two launches).
  bool gemm_stack_qkv_one = true;
  // The encoder stack (Backend::encoder_stack, ModernBERT) past the GEMV and stream GEMM rows,
  // bf16 weights without biases, where the packed flash attention runs: bf16 between every
  // GEMM and its producer. The q/k/v GEMMs (one strided launch) write bf16, which one staging
  // kernel rotates in place (q times the attention's scale: the bf16 the flash kernel would
  // stage), the attention reads them and writes only bf16, the o and Wo projections add into the
  // residual in the GEMM (beta 1), the LayerNorms write only the next GEMM's bf16 input and the
  // GeGLU only bf16 (INFERA_CUDA_ENCODER_STACK=0: the composition of the encoder's fused ops).
  // q, k and v are rounded to bf16 before RoPE, as a bf16 model computes them.
  bool encoder_stack = true;
  // In the encoder stack, batches of at most this many rows (and past the GEMV rows) take the Wi
  // GEMMs and GeGLU as one stream GEMM launch (stream_gemm.cuh's GeGLU epilogue, bf16 out only)
  // instead of a cuBLAS pair and the GeGLU kernel: one launch a layer fewer in the latency chain
  // of short batches (1x93). At most 128 (INFERA_CUDA_ENCODER_STREAM_GLU=N; 0: off). Off: slower
  // on an H100 (ModernBERT-large 1x93 1.05 -> 1.37 ms; bench/reference/lead21_h200/run1).
  int64_t encoder_stream_glu_max_rows = 0;
  bool gemm_stack_attention16 = true;
  // A file that gets the last launch's per-block barrier timestamps (DecodeStackArgs::trace) when
  // the backend is destroyed (INFERA_CUDA_DECODE_STACK_TRACE; a diagnostic: empty = none).
  std::string decode_stack_trace;
  bool residual_mlp_carveout = false;
  int64_t residual_mlp_chunk = 0;
  bool residual_mlp_lsu = false;
  int64_t residual_mlp_threads = 256;
  // A step never seen before (its first 16 launches match no earlier step's) has its kernels
  // launched as the host records them instead of all at the end (INFERA_CUDA_STREAM=0: at the
  // end). Prefill steps, whose shapes rarely repeat, stop waiting for the host's whole pass.
  bool stream_new_steps = true;
  // Issue a step seen before in chunks of 16, 32, 64, ... launches as the host records it, each
  // chunk replayed from its own graph (INFERA_CUDA_REPLAY_CHUNKS=0: the whole step as one graph at
  // its end). The GPU then starts a step after its first 16 launch records instead of after all.
  bool replay_chunks = true;
  // Prefill GEMMs through cuBLASLt plans made once per shape (descriptors and algorithm kept)
  // instead of cublasGemmEx, which rebuilds both on every call (INFERA_CUDA_CUBLASLT=1: on).
  // Off by default: on the H200 it cut a GEMM launch's host time from ~39 to ~13 us, but no
  // prefill step got faster (replayed steps are GPU-bound) and the first prefill paid ~50 ms
  // more host time (bench/reference/cudah_h200). See gemm_plans.h.
  bool cublaslt_plans = false;
};

// CudaOptions{} with the INFERA_CUDA_* environment overrides applied.
CudaOptions cuda_options_from_env();

// GPUs visible to this process (0 when there is no driver or device).
int cuda_device_count();

std::unique_ptr<Backend> make_cuda_backend(int device);
std::unique_ptr<Backend> make_cuda_backend(int device, const CudaOptions& options);

// Counters of a CUDA backend (nullopt for any other backend): how steps were issued.
struct CudaStats {
  int64_t ops = 0, eager_steps = 0, graph_captures = 0, graph_launches = 0;
  int64_t streamed_steps = 0;      // eager steps whose launches were issued while recorded
  int64_t early_chunks = 0;        // step chunks issued before their step's end (replay_chunks)
  double host_record_seconds = 0;  // host time from each step's first op to its flush, summed
  int64_t recorded_steps = 0;
  int64_t bf16_shadows = 0;          // matmuls that read a bf16 shadow (CudaOptions::bf16_shadow)
  double host_flush_seconds = 0;     // host time inside those steps' flushes (key, graph launch)
  int64_t paired_gemms = 0;          // launches of two GEMMs as one (CudaOptions::paired_gemm)
  int64_t residual_mlp_kernels = 0;  // residual_mlp ops run as one kernel (residual_mlp.cu)
  int64_t fused_gemvs = 0;  // GEMVs with a norm prologue or residual epilogue (b1_fused_chain)
  int64_t decode_stack_kernels = 0;  // decoder_stack ops run as one kernel (decode_stack.cu)
  int64_t decode_stack_ring = 0;     // ... of which with the weight ring (decode_stack_smem)
  int64_t gemm_stacks = 0;           // decoder_stack ops on the GEMM path (gemm_stack)
  int64_t gemm_stack_qkv_one = 0;    // ... their layers with q/k/v as one GEMM (gemm_stack_qkv_one)
  int64_t encoder_stacks = 0;        // encoder_stack ops without f32 round trips (encoder_stack)
  int64_t packed_wgmma = 0;          // packed attentions on the wgmma kernel (packed_wgmma)
  int64_t packed_rope_inside = 0;    // ... of which with RoPE inside (packed_rope_inside)
  int64_t encoder_stream_glu = 0;    // encoder Wi + GeGLU launches (encoder_stream_glu_max_rows)
  int64_t tma_attentions = 0;        // paged attentions on the TMA kernel (flash_tma)
  int64_t tma_queries = 0;           // ... of which with the queries by TMA (flash_tma_queries)
  int64_t glu_gemms = 0;             // gate/up + gated unit as one launch (glu_gemm)
  int64_t qkv_gemms = 0;             // q/k/v GEMM + qk-norm/RoPE/KV write as one (qkv_gemm)
  int64_t residual_gemms = 0;        // x += . W^T on the TMA GEMM (residual_gemm)
};
std::optional<CudaStats> cuda_stats(const Backend& backend);
// With CudaOptions::profile: device time per (op, kernel) since the last call, as a table
// (empty for any other backend or without profiling); resets the counts.
std::string cuda_profile_report(Backend& backend);
// cudaProfilerStart / cudaProfilerStop, so that `ncu --profile-from-start off` profiles only the
// kernels launched in between (step_bench --profile-step: one decode step out of thousands).
void cuda_profiler_range(bool start);

}  // namespace infera
