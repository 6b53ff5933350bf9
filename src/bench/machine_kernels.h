// The SIMD loops behind the machine probes, dispatched at run time to the best target the CPU
// supports (the same Highway dispatch the CPU backend's kernels use, so they run the same ISA).
#pragma once

#include <cstddef>
#include <cstdint>

namespace infera::bench {

// Streams [p, p + n) once, its four quarters in lockstep (aligned vector loads into independent
// accumulators), and returns the sum, so the reads cannot be optimised away. `p` must be aligned
// to 64 bytes.
double stream_read_sum(const float* p, size_t n);

// kFmaAccumulators independent register-resident multiply-add chains of one vector each,
// `iterations` steps long: 2 * kFmaAccumulators * float_lanes() * iterations FLOPs. Returns a
// value that depends on every chain. Enough chains to cover FMA latency x issue width on current
// x86 cores (4 cycles x 2 pipes = 8 in flight) while fitting AVX2's 16 vector registers.
inline constexpr int kFmaAccumulators = 12;
float fma_chains(int64_t iterations, float seed);

// f32 lanes of one vector on the dispatched target (16 for AVX-512, 8 for AVX2).
size_t float_lanes();

// The Highway target the dispatch picked: "AVX3", "AVX2", ...
const char* simd_target_name();

}  // namespace infera::bench
