// Raw-pointer attention kernel of the CPU backend (shapes are checked by the backend).
#pragma once

#include <cstdint>

#include "backend/cpu/thread_pool.h"

namespace infera::cpu {

// q [n, hq, d]; k_cache, v_cache [hkv, capacity, d]; out [n, hq, d]. See Backend::attention_causal.
void attention_causal(ThreadPool& pool, const float* q, int64_t n, int64_t hq, int64_t d,
                      const float* k_cache, const float* v_cache, int64_t hkv, int64_t capacity,
                      int64_t start_pos, float scale, float* out);

}  // namespace infera::cpu
