// Matmul on block-quantized weights (Q8_0, Q4_0, Q4_K, Q6_K), computed on the blocks in place:
// each activation row is quantized on the fly to 8-bit blocks, and every weight block meets its
// activation block in an integer dot product (AVX512-VNNI vpdpbusd where the CPU has it, AVX2
// vpmaddubsw otherwise, plain integer loops on older targets), scaled to f32 once per block.
// No float copy of any weight row is ever made.
//
// Kernels live one file per weight type (matmul_q8_0.cpp, ...), compiled by Highway for every
// x86 target and dispatched at run time like simd_kernels.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "infera/tensor.h"

namespace infera::cpu {

// 32 activations as int8 with one f32 scale: a ~= d * qs (the Q8_0 kernels' activations).
// offset[i] = offset[i + 4] = -128 * (sum of qs[4i, 4i + 4) and qs[16 + 4i, 16 + 4i + 4)), i < 4:
// the Q8_0 row-group kernel reads the weight bytes as unsigned (w + 128) and starts each block's
// int32 lanes there (a 128-bit broadcast), so sum(w * a) = offset + sum((w + 128) * a), lane by
// lane, where int32 lane i of each 128-bit chunk holds bytes 4i..4i+3 of both 16-byte halves.
struct ActBlockQ8 {
  float d;
  int32_t offset[8];
  int8_t qs[32];
};
// 128 activations (4 blocks of 32) for the Q4_0 kernel, laid out the way 4 Q4_0 weight blocks
// unpack without shuffles: the 64 nibble bytes of 4 weight blocks (low nibble = element j, high =
// element j + 16 of block j / 16) become two 512-bit vectors by one AND and one shift, and lo / hi
// below are their activation partners byte for byte. Lanes 4b..4b+3 of the int32 dot product
// belong to block b, so offset (lane 4b = -8 * sum of block b's qs, the weights' -8; other lanes
// 0) starts the accumulator and d (block b's scale in lanes 4b..4b+3) scales it lane by lane.
// A row of k holds ceil(k / 128) groups; the last one's missing blocks are zero.
struct ActGroupQ4_0 {
  int8_t lo[64];  // block b's elements 0..15 at [16b, 16b + 16)
  int8_t hi[64];  // block b's elements 16..31
  int32_t offset[16];
  float d[16];
};
// 256 activations for the K-quant kernels; bsums[g] = sum of qs[16g, 16g + 16), which turns the
// weights' per-group offsets (Q4_K mins, Q6_K's -32) into one multiply per group.
struct ActBlockQ8K {
  float d;
  int16_t bsums[16];
  int8_t qs[256];
};

// The activation block type a weight type's kernel reads, and bytes of one quantized row of k.
bool uses_q8k_activations(DType weight_type);
int64_t activation_row_bytes(DType weight_type, int64_t k);
// Quantizes one f32 row of k (a multiple of the weight type's block size) for that weight type:
// d = max|x| / 127, q = round-half-even(x * (127 / max|x|)) per block (quantize_activation_group).
// Deterministic: every SIMD target writes the same activation blocks, so kernels can be compared
// exactly against a scalar reference.
void quantize_activation_row(DType weight_type, const float* x, int64_t k, void* out);
// One group of n activations to int8 (SIMD, activation_quant.cpp): returns d = max|x| / 127 and
// writes q = x * (127 / max|x|) rounded half to even, so |q| <= 127 (the kernels rely on -128
// never occurring) and |x - d * q| <= d / 2; all zeros give d = 0, q = 0. The same bytes on every
// target.
float quantize_activation_group(const float* x, int64_t n, int8_t* q);
// A row of k (a multiple of 32) as ActBlockQ8 blocks, each group as quantize_activation_group.
void quantize_activation_row_q8(const float* x, int64_t k, ActBlockQ8* out);
// Element p of a quantized activation row as its block scale d and integer q (x[p] ~= d * q),
// whatever the layout: tests and references read activations through this.
void activation_element(DType weight_type, const void* row, int64_t p, float& d, int& q);

// out[i * ldo + j] = dot(activation row i, weight row j) for i < n, j in [j_begin, j_end).
// `acts` holds n rows of activation_row_bytes(wtype, k) bytes; `w` the whole weight, rows of
// dtype_bytes(wtype, k) bytes.
void matmul_rows_quantized(const void* acts, int64_t n, int64_t k, const void* w, DType wtype,
                           int64_t j_begin, int64_t j_end, float* out, int64_t ldo);

// How many distant weight-row ranges a single-row decode GEMV reads in lockstep per thread
// (INFERA_CPU_GEMV_STREAMS = auto (the default), 1, 2, 4 or 8; read once). With S > 1 the
// thread's rows (or row groups) [j_begin, j_end) are cut into S equal ranges and the kernel
// advances one row of each per block step, so S sequential streams are in flight instead of one:
// on the machines measured one stream per core reads ~30 GB/s, four in lockstep ~43 GB/s. Each
// row keeps its own accumulators and summation order, so results are bit-identical whatever S
// (tested). Only n = 1 takes this path (more activation rows would need S times the
// accumulators). Returns 0 for auto: each kernel's measured best (kAutoGemvStreams: 4 for the row
// groups, Q8_0 and Q6_K rows; docs/notes/2026-12-01/issue-8-cpuq.md, issue-8-cpuq8.md). The packed
// bf16 decode (matmul_bf16_packed.h) reads the same setting (auto: kAutoBf16GemvStreams).
int quant_gemv_streams();
// Whether `streams` is a setting quant_gemv_streams() takes: 0 (auto), 1, 2, 4 or 8.
bool valid_gemv_streams(int streams);
// Overrides the value read from INFERA_CPU_GEMV_STREAMS (tests, benchmarks): 0 (auto), 1, 2, 4, 8.
void set_quant_gemv_streams(int streams);

// Whether the decode GEMVs (matmul_quantized_multi, the packed bf16 decode) hand their rows to
// the threads as kDecodeItemsPerThread slices a thread, taken in turn (ThreadPool::parallel_items),
// rather than one fixed slice a thread: INFERA_CPU_DYNAMIC_ROWS = 1 or 0 (the default: the
// dynamic slices measured slower, q8_0 decode x0.93 on the 2-core VM), read once. Every row is
// computed by the same code either way, so results are bit-identical.
bool decode_dynamic_rows();
// Overrides the INFERA_CPU_DYNAMIC_ROWS setting (tests, benchmarks).
void set_decode_dynamic_rows(bool on);
constexpr int64_t kDecodeItemsPerThread = 4;

// Whether the Q6_K kernels (512-bit VNNI path) unpack the 6-bit values' high bits with GFNI
// (vgf2p8affineqb, matmul_q6_k.cpp; 2 fewer vector ops per 64 weights, the same results bit for
// bit): INFERA_CPU_Q6K_GFNI = 1 (the default) or 0 (the shift-and-mask form), read once, and only
// where the CPU has GFNI.
bool q6_k_gfni_unpack();
// Overrides the INFERA_CPU_Q6K_GFNI setting (tests, benchmarks); still only where the CPU has GFNI.
void set_q6_k_gfni_unpack(bool on);
bool cpu_has_gfni();

// The whole op: out[n, m] = x[n, k] . w[m, k]^T for a quantized w, weight rows split over the
// pool. Below kQuantPrefillRows rows of x (decode, small batches) x is quantized once and every
// weight row streams through the integer kernels above. From kQuantPrefillRows on (prefill):
// the int8 GEMM of matmul_int8_gemm.h where the CPU has AVX512-VNNI, else
// matmul_quantized_f32_panels. Throws InvalidArgument when k is not whole blocks.
// `layout` says how w's rows are stored: as in the file, or (Q4_0, Q4_K) in the row groups of
// weight_rowgroups.h that prepare_weight makes where the CPU has the 512-bit kernels.
constexpr int64_t kQuantPrefillRows = 16;
// Bf16Pairs: bf16 weights in the broadcast form of matmul_bf16_packed.h (never a quantized type).
enum class WeightLayout { Rows, RowGroups, Bf16Pairs };
void matmul_quantized(ThreadPool& pool, const float* x, int64_t n, int64_t k, const void* w,
                      DType wtype, int64_t m, float* out, WeightLayout layout = WeightLayout::Rows);

// One weight of matmul_quantized_multi: out[n, m] = x . w^T.
struct QuantMatmulJob {
  const void* w;
  DType wtype;
  int64_t m;
  float* out;
  WeightLayout layout;
};
// Several quantized weights against one input at decode sizes (n < kQuantPrefillRows: the q/k/v
// projections, gate/up), as matmul_quantized on each but in one parallel section: x is quantized
// once per activation format (Q4_K and Q6_K share theirs) on the calling thread, and every
// weight's rows are split evenly over the threads (whole row groups), so
// a decode step hands work to the pool once instead of once per weight. Results are bit-identical
// to matmul_quantized per job. With `swiglu`, jobs must be {gate, up} with equal m and each thread
// then writes gate = silu(gate) * up on its own rows, exactly as the swiglu op computes it.
// From kQuantPrefillRows rows (prefill, without swiglu, at most 8 jobs, where the CPU has the int8
// GEMM): matmul_quantized_int8_gemm_multi, x quantized once per format for all the weights (q/k/v
// x1.04-1.16 over three calls), the same bits as matmul_quantized per job. Throws
// InvalidArgument for other n >= kQuantPrefillRows or a job matmul_quantized would refuse.
void matmul_quantized_multi(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                            const QuantMatmulJob* jobs, int64_t count, bool swiglu = false);
// How many slices matmul_quantized_multi cuts each weight's rows into when the largest has max_m
// rows, on a pool of pool_threads (slice s goes to thread s first).
int64_t quantized_decode_slices(int64_t max_m, int pool_threads);

// Prefill without VNNI: each thread dequantizes a panel of kPanelRows weight rows at a time into a
// cache-sized f32 scratch and runs the f32 register-tile kernel of simd_kernels.cpp over all x
// rows, as the bf16 path widens its panels (exact dequantized weights, f32 activations; no more
// than one panel per thread ever exists in f32).
void matmul_quantized_f32_panels(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                                 const void* w, DType wtype, int64_t m, float* out,
                                 WeightLayout layout = WeightLayout::Rows);

// Weight rows [j, j + rows) as stored in the file: a pointer into w for WeightLayout::Rows,
// else the rows restored into `scratch` (resized as needed).
const uint8_t* plain_weight_rows(const void* w, DType wtype, WeightLayout layout, int64_t k,
                                 int64_t j, int64_t rows, std::vector<uint8_t>& scratch);

// `rows` consecutive quantized weight rows of k elements at `w` to f32 (prefill panels; SIMD,
// within one rounding of quant::dequantize_row).
void dequantize_rows(const void* w, DType dtype, int64_t rows, int64_t k, float* out);

// Converts one weight row of any dtype to f32 (quantized rows dequantized, others widened):
// the embedding gather.
void weight_row_to_f32(const void* row, DType dtype, int64_t n, float* out);

// Instruction set the quantized kernels dispatch to ("AVX3_DL" means AVX512-VNNI).
const char* quant_kernel_target_name();

}  // namespace infera::cpu
