// The CPU backend: F32 activations, weights used in place (F32/F16/BF16 and the block-quantized
// types of quant_matmul.h), SIMD kernels with run-time dispatch, one thread pool. Frontends get it
// through backend/registry.h.
#pragma once

#include <memory>

#include "ops/backend.h"

namespace infera {

// How attention_packed schedules a local (windowed) layer: only the key tiles that overlap the
// window (the default), or every key tile with the window applied per row (the dense baseline
// that benchmarks compare against; identical results).
enum class PackedAttentionSchedule { Windowed, Dense };

// What bf16 weights multiply: f32 activations with the weights widened to f32 (the default,
// within summation order of an f32 reference), or activations rounded to bf16 and AVX512-BF16
// dot products (twice the multiply rate; errors of bf16 compute, as transformers' bf16 models
// have). Bf16 needs a CPU with AVX512-BF16; elsewhere the f32 path runs and name() says so.
enum class MatmulPrecision { F32, BF16 };

// The CPU backend with `threads` workers (0: one per core).
std::unique_ptr<Backend> make_cpu_backend(
    int threads = 0, PackedAttentionSchedule schedule = PackedAttentionSchedule::Windowed,
    MatmulPrecision precision = MatmulPrecision::F32);

}  // namespace infera
