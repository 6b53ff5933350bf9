// The human-readable side of a result: one table row per headline metric (count, min, p50,
// p95) and, where the benchmark derived one, the fraction of a machine limit it reached.
#pragma once

#include <string>

#include "bench/result.h"

namespace infera::bench {

// Rows come from the headline metrics in recording order; a row's "limit" column reads
// derived()["fractions"][metric name] = {"fraction": 0.81, "of": "read bandwidth 31.2 GB/s"}.
std::string summary_table(const BenchResult& result);

}  // namespace infera::bench
