// Highway compiles this file once per x86 target (foreach_target.h re-includes it); the
// HWY_EXPORT tables at the bottom pick the best compiled target at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/float_scan.cpp"
#include "core/float_scan.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <limits>

HWY_BEFORE_NAMESPACE();
namespace infera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t FirstArgmax(const float* HWY_RESTRICT p, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, kNegInf);
  // The largest value (NaNs as -inf), then the first place it occurs: two passes over data the
  // LM head has just written (in cache), no index bookkeeping in the first.
  auto vmax = neg_inf;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, p + i);
    vmax = hn::Max(vmax, hn::IfThenElse(hn::IsNaN(v), neg_inf, v));
  }
  float m = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (; i < n; ++i)
    if (p[i] > m) m = p[i];
  if (!(m > kNegInf)) return -1;
  const auto vm = hn::Set(d, m);
  for (i = 0; i + lanes <= n; i += lanes) {
    const intptr_t at = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, p + i), vm));
    if (at >= 0) return i + at;
  }
  for (; i < n; ++i)
    if (p[i] == m) return i;
  return -1;  // not reached: m is one of the values
}

bool ScrubNanAnyLive(float* HWY_RESTRICT p, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, kNegInf);
  bool live = false;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto v = hn::LoadU(d, p + i);
    const auto nan = hn::IsNaN(v);
    if (!hn::AllFalse(d, nan)) {  // rare: write only the vectors that hold a NaN
      v = hn::IfThenElse(nan, neg_inf, v);
      hn::StoreU(v, d, p + i);
    }
    live = live || !hn::AllFalse(d, hn::Gt(v, neg_inf));
  }
  for (; i < n; ++i) {
    if (p[i] != p[i]) p[i] = kNegInf;
    live = live || p[i] > kNegInf;
  }
  return live;
}

template <bool kAtLeast>
int64_t NextMatch(const float* HWY_RESTRICT p, int64_t n, int64_t from, float t) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vt = hn::Set(d, t);
  int64_t i = from;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, p + i);
    const intptr_t at = hn::FindFirstTrue(d, kAtLeast ? hn::Ge(v, vt) : hn::Gt(v, vt));
    if (at >= 0) return i + at;
  }
  for (; i < n; ++i)
    if (kAtLeast ? p[i] >= t : p[i] > t) return i;
  return n;
}
int64_t NextAbove(const float* p, int64_t n, int64_t from, float t) {
  return NextMatch<false>(p, n, from, t);
}
int64_t NextAtLeast(const float* p, int64_t n, int64_t from, float t) {
  return NextMatch<true>(p, n, from, t);
}

int64_t CountAbove(const float* HWY_RESTRICT p, int64_t n, float t) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vt = hn::Set(d, t);
  int64_t count = 0, i = 0;
  for (; i + lanes <= n; i += lanes)
    count += static_cast<int64_t>(hn::CountTrue(d, hn::Gt(hn::LoadU(d, p + i), vt)));
  for (; i < n; ++i) count += p[i] > t;
  return count;
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace infera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera {
HWY_EXPORT(FirstArgmax);
HWY_EXPORT(ScrubNanAnyLive);
HWY_EXPORT(NextAbove);
HWY_EXPORT(NextAtLeast);
HWY_EXPORT(CountAbove);
HWY_EXPORT(TargetName);

int64_t first_argmax_f32(const float* p, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(FirstArgmax)(p, n) : -1;
}
bool scrub_nan_any_live(float* p, int64_t n) {
  return n > 0 && HWY_DYNAMIC_DISPATCH(ScrubNanAnyLive)(p, n);
}
int64_t next_above_f32(const float* p, int64_t n, int64_t from, float t) {
  return from < n ? HWY_DYNAMIC_DISPATCH(NextAbove)(p, n, from, t) : n;
}
int64_t next_at_least_f32(const float* p, int64_t n, int64_t from, float t) {
  return from < n ? HWY_DYNAMIC_DISPATCH(NextAtLeast)(p, n, from, t) : n;
}
int64_t count_above_f32(const float* p, int64_t n, float t) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(CountAbove)(p, n, t) : 0;
}
const char* float_scan_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
}  // namespace infera
#endif
