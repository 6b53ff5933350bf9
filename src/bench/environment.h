// Where a benchmark ran: the build (git revision, compiler and flags), the machine (CPU model,
// its SIMD extensions, the target the kernels dispatch to, caches, memory) and the OS. Each
// benchmark adds its own facts (threads, backend, weight format, model config hash).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace infera::bench {

nlohmann::json capture_environment();

// Size of the last-level cache in bytes (from sysfs), or 0 when unknown.
int64_t last_level_cache_bytes();

// "2024-05-01T12:00:00Z"
std::string utc_timestamp();

}  // namespace infera::bench
