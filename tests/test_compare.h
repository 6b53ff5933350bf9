// NaN-safe comparisons for tests. A NaN (or inf) where the reference is finite is the worst
// possible difference, never a zero one: std::max and `<` silently skip NaNs, which would let a
// broken kernel pass a tolerance check.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

namespace infera::test {

// max |got[i] - want[i]|; +inf when a value is NaN or infinite on either side, or sizes differ.
inline double max_abs_diff(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double m = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i]))
      return std::numeric_limits<double>::infinity();
    m = std::fmax(m, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return m;
}

// Normalised mean squared error sum (got - want)^2 / sum want^2 (llama.cpp's test-backend-ops
// measure); +inf on any non-finite value or a size mismatch.
inline double nmse(std::span<const float> got, std::span<const double> want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i]))
      return std::numeric_limits<double>::infinity();
    const double d = got[i] - want[i];
    err += d * d;
    ref += want[i] * want[i];
  }
  return ref > 0 ? err / ref : err;
}

}  // namespace infera::test
