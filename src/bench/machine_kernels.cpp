// Highway compiles this file once per target (foreach_target.h re-includes it); HWY_EXPORT at
// the bottom picks the best compiled target at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/machine_kernels.cpp"
#include "bench/machine_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace infera::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_NOINLINE double StreamReadSum(const float* HWY_RESTRICT p, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  // Four streams in lockstep (the buffer's quarters, two vectors of each per step): a core keeps
  // more lines in flight than with one sequential stream (on a 2-core EPYC: 43 vs 30 GB/s on one
  // core, 85 vs 60 on two), so this finds the bandwidth a reader can reach, not what one stream
  // gets. Eight independent sums keep the loop bound by loads, not by the add latency.
  const size_t step = 2 * lanes, quarter = n / 4 / step * step;
  const float* HWY_RESTRICT a = p;
  const float* HWY_RESTRICT b = p + quarter;
  const float* HWY_RESTRICT c = p + 2 * quarter;
  const float* HWY_RESTRICT e = p + 3 * quarter;
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  auto s4 = hn::Zero(d), s5 = hn::Zero(d), s6 = hn::Zero(d), s7 = hn::Zero(d);
  for (size_t i = 0; i < quarter; i += step) {
    s0 = hn::Add(s0, hn::Load(d, a + i));
    s1 = hn::Add(s1, hn::Load(d, a + i + lanes));
    s2 = hn::Add(s2, hn::Load(d, b + i));
    s3 = hn::Add(s3, hn::Load(d, b + i + lanes));
    s4 = hn::Add(s4, hn::Load(d, c + i));
    s5 = hn::Add(s5, hn::Load(d, c + i + lanes));
    s6 = hn::Add(s6, hn::Load(d, e + i));
    s7 = hn::Add(s7, hn::Load(d, e + i + lanes));
  }
  const auto total =
      hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), hn::Add(hn::Add(s4, s5), hn::Add(s6, s7)));
  double sum = hn::GetLane(hn::SumOfLanes(d, total));
  for (size_t i = 4 * quarter; i < n; ++i) sum += p[i];
  return sum;
}

HWY_NOINLINE float FmaChains(int64_t iterations, float seed) {
  const hn::ScalableTag<float> d;
  // acc = acc * m + c converges to c / (1 - m) = seed: values stay normal (no denormal or
  // overflow slowdowns) however long the loop runs.
  const auto m = hn::Set(d, 0.999f);
  const auto c = hn::Set(d, seed * 0.001f);
  static_assert(kFmaAccumulators == 12, "the loop body below spells out 12 chains");
  auto a0 = hn::Set(d, seed), a1 = hn::Set(d, seed + 1), a2 = hn::Set(d, seed + 2);
  auto a3 = hn::Set(d, seed + 3), a4 = hn::Set(d, seed + 4), a5 = hn::Set(d, seed + 5);
  auto a6 = hn::Set(d, seed + 6), a7 = hn::Set(d, seed + 7), a8 = hn::Set(d, seed + 8);
  auto a9 = hn::Set(d, seed + 9), a10 = hn::Set(d, seed + 10), a11 = hn::Set(d, seed + 11);
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
    a10 = hn::MulAdd(a10, m, c);
    a11 = hn::MulAdd(a11, m, c);
  }
  const auto total = hn::Add(
      hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
      hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  return hn::GetLane(hn::SumOfLanes(d, total));
}

size_t FloatLanes() { return hn::Lanes(hn::ScalableTag<float>()); }
const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace infera::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::bench {
HWY_EXPORT(StreamReadSum);
HWY_EXPORT(FmaChains);
HWY_EXPORT(FloatLanes);
HWY_EXPORT(TargetName);

double stream_read_sum(const float* p, size_t n) {
  return HWY_DYNAMIC_DISPATCH(StreamReadSum)(p, n);
}
float fma_chains(int64_t iterations, float seed) {
  return HWY_DYNAMIC_DISPATCH(FmaChains)(iterations, seed);
}
size_t float_lanes() { return HWY_DYNAMIC_DISPATCH(FloatLanes)(); }
const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
}  // namespace infera::bench
#endif
