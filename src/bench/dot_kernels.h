// Register-resident dot-product chains for the peak multiply-add rates of the instructions the
// CPU matmuls use besides f32 FMA: bf16 pairs (vdpbf16ps, the --matmul-precision bf16 path) and
// u8 x s8 quads (vpdpbusd, the quantized prefill GEMMs). AVX-512 only, entered after a CPUID check.
#pragma once

#include <cstdint>

namespace infera::bench {

enum class DotKind { F32Fma, Bf16Dot, Int8Dot };

// "f32 FMA", "bf16 dot (vdpbf16ps)", "int8 dot (vpdpbusd)".
const char* dot_kind_name(DotKind kind);

// Whether this CPU runs `kind`'s chains (F32Fma: always; the others need AVX512-BF16 /
// AVX512-VNNI).
bool dot_kind_supported(DotKind kind);

// kDotAccumulators independent 512-bit accumulators, each taking one dot instruction per
// iteration: kDotAccumulators * dot_flops_per_instruction(kind) multiply-adds x 2 per iteration.
inline constexpr int kDotAccumulators = 16;
// FLOPs (one multiply + one add = 2) of one instruction: vdpbf16ps 16 lanes x 2 pairs x 2 = 64;
// vpdpbusd 16 lanes x 4 products x 2 = 128 (integer "OPs", counted as a matmul counts them).
double dot_flops_per_instruction(DotKind kind);

// Runs the chains for `iterations` steps from `seed` and returns a value that depends on every
// accumulator (so nothing is optimised away). Bf16Dot and Int8Dot only where supported.
double dot_chains(DotKind kind, int64_t iterations, float seed);

}  // namespace infera::bench
