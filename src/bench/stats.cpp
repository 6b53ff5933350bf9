#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace infera::bench {

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty() || std::isnan(q)) return std::numeric_limits<double>::quiet_NaN();
  q = std::clamp(q, 0.0, 100.0);
  const double index = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(index));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = index - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

Summary summarize(const std::vector<double>& samples) {
  Summary s;
  std::vector<double> finite;
  finite.reserve(samples.size());
  for (double v : samples) {
    if (std::isfinite(v))
      finite.push_back(v);
    else
      ++s.invalid;
  }
  s.count = static_cast<int64_t>(finite.size());
  if (finite.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.min = s.p50 = s.p95 = s.max = s.mean = nan;
    return s;
  }
  std::sort(finite.begin(), finite.end());
  s.min = finite.front();
  s.max = finite.back();
  s.p50 = percentile_sorted(finite, 50.0);
  s.p95 = percentile_sorted(finite, 95.0);
  double sum = 0;
  for (double v : finite) sum += v;
  s.mean = sum / static_cast<double>(finite.size());
  return s;
}

}  // namespace infera::bench
