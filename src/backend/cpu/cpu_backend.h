// The CPU backend: F32 activations, weights used in place (F32/F16/BF16 and the block-quantized
// types of quant_matmul.h), SIMD kernels with run-time dispatch, one thread pool. Frontends get it
// through backend/registry.h.
#pragma once

#include <memory>

#include "ops/backend.h"

namespace infera {

// The CPU backend with `threads` workers (0: one per core).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace infera
