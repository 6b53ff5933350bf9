// Prefill on block-quantized weights (Q8_0, Q4_0, Q4_K, Q6_K) as an int8 GEMM through
// AVX512-VNNI: 64 byte products per vpdpbusd, four times the multiply-adds of an f32 FMA.
//
// Each thread takes panels of kPanelRows (16) weight rows, the split the f32 / bf16 paths use, and
// unpacks a panel once into an integer panel: per sub-block of S elements (32; 16 for Q6_K) and per
// group of 4 elements, the 16 rows' 4 bytes side by side in one 512-bit vector, the weights as
// unsigned bytes (Q8_0 + 128, Q4_0 / Q4_K nibbles, Q6_K 6-bit values) with one f32 scale per row
// and sub-block (and Q4_K's f32 min). The activations are quantized once per call to int8 per
// sub-block (d = max|x| / 127, as the decode path does) with -zero_point * sum(q) per sub-block,
// which removes the weights' offset (128, 8, 0 or 32) without touching the weights. A register
// tile of up to 8 activation rows x 16 weight rows broadcasts 4 activation bytes against a weight
// vector per vpdpbusd, so no horizontal sum is ever needed, and accumulates in f32 per sub-block:
//   out[i, j] += scale[j] * d_a[i] * (sum_4 w_u8 * a + offset_a[i])  (- min[j] * d_a[i] * sum(a_i))
// Results equal the reference dequantized weights times the quantized activations up to f32
// rounding of the per-sub-block scaling, as on the decode path.
#pragma once

#include <cstdint>

#include "backend/cpu/quant_matmul.h"  // WeightLayout
#include "backend/cpu/thread_pool.h"
#include "infera/tensor.h"

namespace infera::cpu {

// True when this CPU runs the int8 GEMM (AVX512-F/BW/DQ/VL and AVX512-VNNI; checked once).
bool has_int8_gemm();

// Elements per activation / weight sub-block of the GEMM for a quantized weight type.
int int8_gemm_sub_block(DType wtype);

// Weight panels per register tile (1 to 4; each activation broadcast feeds that many vpdpbusd):
// 3, or 1 with INFERA_CPU_INT8_PANEL_PAIRS=0. The same results whatever the count.
int int8_panels_per_tile();
void set_int8_panels_per_tile(int panels);  // tests, benchmarks; anything else throws

// out[n, m] = x[n, k] . w[m, k]^T for a quantized w (k whole blocks), weight panels split over the
// pool. Requires has_int8_gemm().
void matmul_quantized_int8_gemm(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                                const void* w, DType wtype, int64_t m, float* out,
                                WeightLayout layout = WeightLayout::Rows);
// The same for up to 8 weights against one x (q/k/v, gate/up): x quantized once for all the
// weights of one format (Q4_K's for Q4_K, ...), each weight's GEMM after the other. Bit-identical
// to one call per weight. The jobs must pass matmul_quantized's checks (it makes them).
void matmul_quantized_int8_gemm_multi(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                                      const QuantMatmulJob* jobs, int64_t count);

}  // namespace infera::cpu
