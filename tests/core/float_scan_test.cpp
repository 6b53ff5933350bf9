// The SIMD logit scans (core/float_scan.h: argmax, NaN scrub, the next value above / at least a
// threshold, a count above it) against plain scalar loops (the ones they replaced in the sampler
// and Backend::argmax_rows), on every SIMD target this CPU runs: random rows, the
// maximum repeated (the first place wins), NaNs anywhere (skipped / scrubbed to -inf), +inf,
// signed zeros, rows with nothing above -inf, and every length up to 70 (the vector tails) as well
// as Qwen3's 151,936. An argmax that took the last of equal maxima, let a NaN win or ignored the
// tail fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "core/float_scan.h"

namespace infera {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

int64_t scalar_argmax(const std::vector<float>& v) {
  int64_t best = -1;
  float best_value = -kInf;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] > best_value) best_value = v[i], best = static_cast<int64_t>(i);
  return best;
}

// Rows of every kind, each at several lengths.
std::vector<std::vector<float>> rows() {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<std::vector<float>> out;
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{15}, size_t{16}, size_t{17},
                   size_t{31}, size_t{33}, size_t{63}, size_t{64}, size_t{65}, size_t{70},
                   size_t{151936}}) {
    for (int kind = 0; kind < 8; ++kind) {
      std::vector<float> v(n);
      for (float& x : v) x = nd(rng);
      if (n > 0) {
        const size_t a = rng() % n, b = rng() % n, c = n - 1;
        switch (kind) {
          case 1: v[a] = v[b] = v[c] = 50.0f; break;            // ties: the first of them
          case 2: v[a] = kNaN; v[c] = kNaN; break;              // NaNs, one in the tail
          case 3: v[b] = kInf; v[c] = kInf; break;              // +inf, twice
          case 4: for (float& x : v) x = -kInf; break;          // nothing above -inf
          case 5: for (float& x : v) x = kNaN; v[a] = -kInf; break;
          case 6: for (float& x : v) x = -std::fabs(x) - 1.0f;  // the maximum a signed zero
                  v[a] = -0.0f; v[b] = 0.0f; break;
          case 7: v[c] = 99.0f; break;                          // the maximum last
          default: break;
        }
      }
      out.push_back(std::move(v));
    }
  }
  return out;
}

template <typename Body>
void for_each_target(Body body) {
  int tested = 0;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    ASSERT_STREQ(float_scan_target_name(), hwy::TargetName(target));
    ++tested;
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 2);
}

TEST(FloatScan, FirstArgmaxEqualsTheScalarLoopOnEverySimdTarget) {
  const auto all = rows();
  for_each_target([&] {
    for (size_t r = 0; r < all.size(); ++r)
      ASSERT_EQ(first_argmax_f32(all[r].data(), static_cast<int64_t>(all[r].size())),
                scalar_argmax(all[r]))
          << "row " << r << " of " << all[r].size();
  });
}

TEST(FloatScan, ScrubTurnsNansIntoMinusInfinityOnEverySimdTarget) {
  const auto all = rows();
  for_each_target([&] {
    for (size_t r = 0; r < all.size(); ++r) {
      std::vector<float> got = all[r], want = all[r];
      bool live = false;
      for (float& x : want) {
        if (std::isnan(x)) x = -kInf;
        live |= x != -kInf;
      }
      ASSERT_EQ(scrub_nan_any_live(got.data(), static_cast<int64_t>(got.size())), live) << r;
      if (!got.empty())  // (memcmp takes no null pointer, even for 0 bytes)
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << r;
    }
  });
}

TEST(FloatScan, NextMatchAndCountEqualTheScalarLoopsOnEverySimdTarget) {
  const auto all = rows();
  for_each_target([&] {
    for (size_t r = 0; r < all.size(); ++r) {
      const std::vector<float>& v = all[r];
      const auto n = static_cast<int64_t>(v.size());
      for (const float t : {-kInf, -1.0f, 0.0f, -0.0f, 2.5f, 50.0f, kInf}) {
        int64_t count = 0;
        for (const float x : v) count += x > t;
        ASSERT_EQ(count_above_f32(v.data(), n, t), count) << r << " t " << t;
        // Every match in order from every few starting points, as the sampler walks them.
        for (int64_t from = 0; from <= n; from += std::max<int64_t>(1, n / 5)) {
          int64_t above = from, at_least = from;
          while (above < n && !(v[size_t(above)] > t)) ++above;
          while (at_least < n && !(v[size_t(at_least)] >= t)) ++at_least;
          ASSERT_EQ(next_above_f32(v.data(), n, from, t), above) << r << " from " << from;
          ASSERT_EQ(next_at_least_f32(v.data(), n, from, t), at_least) << r << " from " << from;
        }
      }
    }
  });
}

}  // namespace
}  // namespace infera
