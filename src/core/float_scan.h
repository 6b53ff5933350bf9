// Scans of a float row in SIMD (Highway, the best target of the running CPU), for the hot paths
// that look at every logit of a decode step: greedy choice and the sampler's NaN scrub. Over
// Qwen3's 151,936 logits the scalar loops took ~200 us a token (2 % of a CPU decode step).
#pragma once

#include <cstdint>

namespace infera {

// The index of the first largest value of p[0, n), NaNs skipped (as a scalar loop with a strict >
// from -inf); -1 when no value is larger than -inf (empty, or all -inf / NaN).
int64_t first_argmax_f32(const float* p, int64_t n);

// NaNs in p[0, n) become -inf; returns whether any value is then larger than -inf.
bool scrub_nan_any_live(float* p, int64_t n);

// The first index i in [from, n) with p[i] > t (at_least: p[i] >= t), or n: a filter's next
// candidate, found a vector at a time (the sampler's top-k and candidate scans).
int64_t next_above_f32(const float* p, int64_t n, int64_t from, float t);
int64_t next_at_least_f32(const float* p, int64_t n, int64_t from, float t);
// How many of p[0, n) are > t.
int64_t count_above_f32(const float* p, int64_t n, float t);

// The Highway target the scans dispatch to ("AVX3", "AVX2", ...): tests check they ran on each.
const char* float_scan_target_name();

}  // namespace infera
