// The CPU backend's names for the core dtype conversions (src/core/dtype_convert.h).
#pragma once

#include "core/dtype_convert.h"

namespace infera::cpu {
using infera::bf16_to_f32;
using infera::f16_to_f32;
using infera::f32_to_bf16;
using infera::f32_to_f16;
}  // namespace infera::cpu
