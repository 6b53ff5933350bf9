// Samples and their summary statistics, shared by every benchmark (decoders, encoders, the
// decision runtime, machine probes). Machines here are noisy, so results carry the raw samples
// and robust statistics (min, median, p95) rather than a mean alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infera::bench {

// The statistics of a sample set. Non-finite samples (NaN, +-inf: a failed or meaningless
// measurement) are left out of every statistic and counted in `invalid`; with no finite sample
// at all, every statistic is NaN (written as JSON null).
struct Summary {
  int64_t count = 0;    // finite samples
  int64_t invalid = 0;  // NaN or infinite samples
  double min = 0, p50 = 0, p95 = 0, max = 0, mean = 0;
};

// The q-th percentile (q in [0, 100]) of `sorted` (ascending, finite) by linear interpolation
// between closest ranks, numpy.percentile's default ("linear", Hyndman-Fan type 7): the value at
// fractional index q/100 * (n - 1). NaN for an empty input.
double percentile_sorted(const std::vector<double>& sorted, double q);

Summary summarize(const std::vector<double>& samples);

// A named series of measurements of one quantity, in one unit.
struct Metric {
  std::string name;  // dotted, e.g. "prefill.512.tokens_per_second"
  std::string unit;  // "tokens/s", "s", "GB/s", "GFLOP/s", "MiB"
  bool higher_is_better = true;
  // A figure a reader looks for first (tokens/s, TTFT, load, bandwidth, peak RSS), shown in the
  // summary table and plotted by default; stage breakdowns and raw step times are not.
  bool headline = true;
  std::vector<double> samples;

  Summary summary() const { return summarize(samples); }
};

}  // namespace infera::bench
