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

// The CPU backend with `threads` workers (0: one per core).
std::unique_ptr<Backend> make_cpu_backend(
    int threads = 0, PackedAttentionSchedule schedule = PackedAttentionSchedule::Windowed);

}  // namespace infera
