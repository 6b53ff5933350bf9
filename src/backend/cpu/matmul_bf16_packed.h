// bf16 weights packed for AVX512-BF16 dot products in the broadcast form (issue 8): the int8
// GEMM's shape, with lanes = weight rows, so no lane sums are ever needed.
//
// Layout ("bf16 pairs"): the m rows of a [m, k] bf16 weight in groups of 16 (the last group padded
// with zero rows), k padded to an even kp with a zero. Group g is kp / 2 vectors of 64 bytes,
// one after the other; vector p holds, for r = 0..15, the pair w[16g + r][2p], w[16g + r][2p + 1]
// at 16-bit elements 2r and 2r + 1 (32-bit lane r = row 16g + r). Bytes: ceil(m / 16) * 16 * kp * 2
// (the file's size when m % 16 == 0 and k is even). A view of rows [r0, r0 + r) (Tensor::rows, as
// ModernBERT splits its fused Wqkv / Wi) is read through the whole packed matrix's rows r0.. .
//
// The kernel broadcasts one activation pair (32 bits) over the 16 lanes and multiplies it into a
// group's vector with one vdpbf16ps: lane r accumulates row r's dot product. Every output (i, j)
// has ONE f32 accumulator that takes the pairs in order p = 0, 1, ..., kp / 2 - 1, whatever n is
// and whichever tile computes it: decode (n < 4, a GEMV over groups) and prefill (register tiles
// of activation rows x groups) give bit-identical rows, so a sequence's logits do not depend on
// its batch (tested: MatmulRowsAreBitIdenticalWhateverShareTheCall on cpu_bf16dot_2t).
#pragma once

#include <cstddef>
#include <cstdint>

namespace infera::cpu {

constexpr int64_t kBf16GroupRows = 16;

// k rounded up to even: the row stride of packed weights and of the activations they multiply.
inline int64_t bf16_pairs_width(int64_t k) { return (k + 1) / 2 * 2; }
// Bytes of the packed form of a [m, k] bf16 weight.
inline size_t bf16_pairs_bytes(int64_t m, int64_t k) {
  return static_cast<size_t>((m + kBf16GroupRows - 1) / kBf16GroupRows * kBf16GroupRows *
                             bf16_pairs_width(k)) *
         sizeof(uint16_t);
}

// w [m, k] rows -> dst (bf16_pairs_bytes(m, k) bytes), padding zeroed.
void pack_bf16_pairs(const uint16_t* w, int64_t m, int64_t k, uint16_t* dst);
// The decode's stream count under INFERA_CPU_GEMV_STREAMS=auto (the backend's default): measured
// fastest (docs/notes/2026-12-01/issue-8-cpudec.md).
constexpr int kAutoBf16GemvStreams = 4;

// Row `row` (< m) of a packed [m, k] weight back as its k elements.
void bf16_pairs_row(const uint16_t* packed, int64_t k, int64_t row, uint16_t* dst);

// dst[i * kp + p] = bf16(src[i * k + p]) for p < k (rounded to nearest even, as
// round_rows_to_bf16), dst[i * kp + k] = 0 when k is odd (kp = bf16_pairs_width(k)): the
// activation rows the packed kernel reads. Requires has_bf16_dot().
void round_rows_to_bf16_pairs(const float* src, int64_t n, int64_t k, uint16_t* dst);

// out[i * ldo + j - col0] = sum_p x[i * kp + p] * w[j][p] for i < n, j in [j_begin, j_end) (rows
// of the packed matrix, j_end <= its m; any range: a thread's groups, or the rows of a view),
// x bf16 rows of stride kp = bf16_pairs_width(k) (round_rows_to_bf16_pairs), w packed [m, k] as
// above, sums in f32 in the order the header states. col0 <= j_begin. Requires has_bf16_dot().
// `streams` (2, 4 or 8; anything else: one) is the decode's (n < 4) weight streams in lockstep:
// the range's whole groups cut into that many distant ranges, one group of each per step, as the
// quantized GEMVs do (quant_matmul.h); one = 8 adjacent groups per tile. Same bits whatever the
// count.
void matmul_rows_bf16_pairs(const uint16_t* x, int64_t n, int64_t k, const uint16_t* w,
                            int64_t j_begin, int64_t j_end, float* out, int64_t ldo, int64_t col0,
                            int streams = 1);

}  // namespace infera::cpu
