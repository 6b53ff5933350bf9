// Sampling on the GPU: the host Sampler's pipeline (sample/sampler.cpp) after its penalties —
// temperature, top-k, top-p, min-p, inverse-CDF draw — one block per row, so that only the chosen
// id crosses to the host instead of [rows, vocab] logits.
//
// Same semantics as the Sampler, row by row:
// - NaN counts as -inf; greedy (temperature <= 0, or a temperature so small that the largest
//   finite logit divided by it overflows) is the argmax of the unscaled row, ties to the lowest id;
// - the order of every filter and of the draw is the Sampler's total order: larger (scaled) logit
//   first, equal logits by lower id; top-k keeps everything >= the k-th largest live value;
// - top-p keeps the smallest top set whose mass reaches top_p (HF's tail rule), min-p drops
//   weights below min_p * p_max; the draw walks the survivors by logit when top-k is on and by id
//   otherwise, exactly as the Sampler's candidate lists are ordered.
// Instead of sorting 151,936 values, every "first token in that order whose cumulative mass
// reaches m" is a radix descent over the 32-bit order-preserving key of the logit (4 passes of 8
// bits, a 256-bin mass histogram each), then a walk over the tied tokens by id. Masses are fixed
// point (weight * 2^44, weights in [0, 1]) and summed with integer atomics: exact, so a draw does
// not depend on the order in which threads add. The Sampler sums float weights in double; the
// two can differ only when u or top_p falls within ~2^-44 of a token boundary.
// With top-k on and at most kListCap candidates (k plus ties; the usual case), the candidates are
// gathered once and sorted in shared memory, and top-p, min-p and the draw are prefix sums over
// that list: the row is read 6 times (argmax, 4 count passes, gather) instead of ~15. None of
// those 6 passes divides by the temperature: division is monotone, so argmax, top-k's count
// descent and the gather compare unscaled keys, and only the gathered candidates are divided.
#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

using u64 = unsigned long long;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;  // 32: one value per lane in the second reduction stage
constexpr double kFixedScale = 17592186044416.0;  // 2^44: 2^18 weights of at most 1 fit 2^62
constexpr unsigned kDeadKey = 0x007fffffu;        // key_of(-inf); every live value's key is above

// Float bits made order-preserving as unsigned (-0 is folded into +0 by RowView::at).
__device__ __forceinline__ unsigned key_of(float v) {
  const unsigned b = __float_as_uint(v);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}
__device__ __forceinline__ float value_of(unsigned k) {
  return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k);
}

// One row as the Sampler sees it after `v /= temperature` (IEEE division, as the host's).
struct RowView {
  const float* x;
  int width;
  float temperature;  // 1: not divided
  __device__ __forceinline__ float at(int i) const {
    float v = x[i];
    return scale(v != v ? -INFINITY : v);
  }
  // A value of the unscaled row (NaN already -inf) as this view sees it.
  __device__ __forceinline__ float scale(float v) const {
    if (temperature != 1.0f) v = __fdiv_rn(v, temperature);
    return v == 0.0f ? 0.0f : v;  // -0 ties with +0: the host compares values
  }
};

// Dividing by a temperature > 0 (rounded, -0 folded) is monotone non-decreasing, so the scaled
// row's order statistics are the unscaled row's, divided, and "scaled key >= floor_key" is
// "unscaled key >= some bound": this finds that bound (a binary search over the 32-bit keys, 32
// divisions per thread) so that full passes over the row compare unscaled keys and divide nothing.
__device__ unsigned lowest_unscaled_key(const RowView& row, unsigned floor_key) {
  unsigned lo = kDeadKey, hi = key_of(INFINITY);  // -inf never reaches floor_key, +inf always does
  while (hi - lo > 1) {
    const unsigned mid = lo + (hi - lo) / 2;  // keys strictly between are never NaN
    if (key_of(row.scale(value_of(mid))) >= floor_key)
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

// Top-k lists up to this long (k plus the ties of the k-th value) are sorted in shared memory.
constexpr int kListCap = 2048;
constexpr int kNoList = -2;

struct Shared {
  u64 bins[256];        // a descent pass's mass per key digit
  unsigned first[256];  // the last pass's lowest id per digit
  u64 reduce[kWarps];
  int digit, found, index, count;
  u64 above;
  u64 list[kListCap];  // top-k candidates: key << 32 | (0xffffffff - id), sorted descending
  u64 cum[kListCap];   // inclusive prefix sums of their masses
};

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();  // the previous reduction's readers are done with sh.reduce
  if (lane == 0) sh.reduce[warp] = static_cast<u64>(v);
  __syncthreads();
  v = static_cast<T>(sh.reduce[lane]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
struct Max {
  __device__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};
struct Sum {
  __device__ u64 operator()(u64 a, u64 b) const { return a + b; }
};
// The mass of a count descent (top-k): every token weighs 1.
struct CountOne {
  __device__ u64 operator()(float) const { return 1; }
};
template <typename Mass>
struct IsCount : std::false_type {};
template <>
struct IsCount<CountOne> : std::true_type {};

// Total mass of the tokens `keep` admits.
template <typename Keep, typename Mass>
__device__ u64 total_mass(const RowView& row, Keep keep, Mass mass, Shared& sh) {
  u64 s = 0;
  for (int i = threadIdx.x; i < row.width; i += kThreads) {
    const float v = row.at(i);
    if (keep(i, v, key_of(v))) s += mass(v);
  }
  return block_reduce(s, Sum{}, sh);
}

// The token with the `t`-th (1-based) lowest id among those `keep` admits whose key is `key`.
template <typename Keep>
__device__ int nth_with_key(const RowView& row, Keep keep, unsigned key, u64 t, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 seen = 0;
  for (int base = 0; base < row.width; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    bool hit = false;
    if (i < row.width) {
      const float v = row.at(i);
      hit = key_of(v) == key && keep(i, v, key);
    }
    const int count = __syncthreads_count(hit);
    if (seen + static_cast<u64>(count) < t) {
      seen += static_cast<u64>(count);
      continue;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) sh.reduce[warp] = __popc(ballot);
    __syncthreads();
    u64 before = seen + __popc(ballot & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) before += sh.reduce[w];
    if (hit && before + 1 == t) sh.index = i;
    __syncthreads();
    return sh.index;
  }
  return -1;  // unreachable: the descent counted at least t such tokens
}

// The first token, in the Sampler's order (larger value first, equal values by lower id), among
// those `keep` admits, whose cumulative mass (its own included) reaches `need` >= 1. Returns false
// when their total mass is below `need`; else sets *key and, with find_index, *index.
template <typename Keep, typename Mass>
__device__ bool descend(const RowView& row, Keep keep, Mass mass, u64 need, bool find_index,
                        unsigned* key, int* index, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned prefix = 0, mask = 0;
  u64 above = 0;  // mass of the admitted tokens with keys above the prefix's range
  for (int shift = 24; shift >= 0; shift -= 8) {
    __syncthreads();  // readers of the previous pass's bins and results are done
    for (int b = threadIdx.x; b < 256; b += kThreads) {
      sh.bins[b] = 0;
      sh.first[b] = 0xffffffffu;
    }
    __syncthreads();
    // Logits crowd into a few digits (the top byte is sign and exponent), so per-lane atomics
    // would serialize on those bins: each warp adds one sum per distinct digit among its lanes.
    for (int base = 0; base < row.width; base += kThreads) {  // uniform trip count
      const int i = base + static_cast<int>(threadIdx.x);
      bool in = false;
      unsigned d = 0;
      u64 m = 0;
      if (i < row.width) {
        const float v = row.at(i);
        const unsigned k = key_of(v);
        if ((k & mask) == prefix && keep(i, v, k)) {
          m = mass(v);
          in = m != 0;  // a zero mass never reaches `need`
          d = (k >> shift) & 0xffu;
          if (in && shift == 0) atomicMin(&sh.first[d], static_cast<unsigned>(i));
        }
      }
      if constexpr (IsCount<Mass>::value) {
        // Counting (top-k): the lanes of one digit add how many they are, one atomic per digit,
        // all issued together (distinct bins), instead of one shuffle reduction per digit.
        const unsigned peers = __match_any_sync(0xffffffffu, in ? d : 0x100u);
        if (in && lane == __ffs(peers) - 1) atomicAdd(&sh.bins[d], static_cast<u64>(__popc(peers)));
      } else {
        for (unsigned todo = __ballot_sync(0xffffffffu, in); todo != 0;) {
          const int src = __ffs(todo) - 1;
          const unsigned digit = __shfl_sync(0xffffffffu, d, src);
          const bool mine = in && d == digit;
          u64 sum = mine ? m : 0;
#pragma unroll
          for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
          if (lane == src) atomicAdd(&sh.bins[digit], sum);
          todo &= ~__ballot_sync(0xffffffffu, mine);
        }
      }
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l holds digits 255 - 8l down to 248 - 8l; the scan runs from the top digit down.
      u64 part = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) part += sh.bins[255 - 8 * lane - j];
      u64 incl = part;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const u64 t = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += t;
      }
      const unsigned reached = __ballot_sync(0xffffffffu, above + incl >= need);
      if (reached == 0) {
        if (lane == 0) sh.found = 0;
      } else if (lane == __ffs(reached) - 1) {
        u64 a = above + incl - part;
        int d = 255 - 8 * lane;
        for (int j = 0; j < 7 && a + sh.bins[d] < need; ++j, --d) a += sh.bins[d];
        sh.digit = d;
        sh.above = a;
        sh.found = 1;
      }
    }
    __syncthreads();
    if (!sh.found) return false;  // only in the first pass: later ones hold at least `need`
    prefix |= static_cast<unsigned>(sh.digit) << shift;
    mask |= 0xffu << shift;
    above = sh.above;
  }
  *key = prefix;
  if (!find_index) return true;
  // Every token with this key has the same mass: the t-th of them by id reaches `need`.
  const u64 tie_mass = mass(value_of(prefix));
  const u64 t = (need - above + tie_mass - 1) / tie_mass;
  *index =
      t == 1 ? static_cast<int>(sh.first[prefix & 0xffu]) : nth_with_key(row, keep, prefix, t, sh);
  return true;
}

// The first token by id, among those `keep` admits, whose cumulative mass exceeds `target`
// (< their total). Each thread owns a contiguous slice of ids; a block scan of the slices' masses
// finds the one slice that holds the token, whose thread walks it.
template <typename Keep, typename Mass>
__device__ int draw_by_index(const RowView& row, Keep keep, Mass mass, u64 target, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per = (row.width + kThreads - 1) / kThreads;
  const int lo = min(row.width, static_cast<int>(threadIdx.x) * per), hi = min(row.width, lo + per);
  u64 part = 0;
  for (int i = lo; i < hi; ++i) {
    const float v = row.at(i);
    if (keep(i, v, key_of(v))) part += mass(v);
  }
  u64 incl = part;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const u64 t = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += t;
  }
  __syncthreads();
  if (lane == 31) sh.reduce[warp] = incl;
  __syncthreads();
  u64 before = incl - part;
  for (int w = 0; w < warp; ++w) before += sh.reduce[w];
  if (part > 0 && before <= target && target < before + part) {
    u64 cumulative = before;
    for (int i = lo; i < hi; ++i) {
      const float v = row.at(i);
      if (!keep(i, v, key_of(v))) continue;
      cumulative += mass(v);
      if (cumulative > target) {
        sh.index = i;
        break;
      }
    }
  }
  __syncthreads();
  return sh.index;
}

// Inclusive prefix sums of mass_at(j) for list entries j < n into sh.cum; returns the total.
template <typename MassAt>
__device__ u64 scan_list(int n, MassAt mass_at, Shared& sh) {
  constexpr int kPer = kListCap / kThreads;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int j0 = static_cast<int>(threadIdx.x) * kPer;
  u64 m[kPer], part = 0;
#pragma unroll
  for (int e = 0; e < kPer; ++e) part += m[e] = j0 + e < n ? mass_at(j0 + e) : 0;
  u64 incl = part;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const u64 t = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += t;
  }
  __syncthreads();
  if (lane == 31) sh.reduce[warp] = incl;
  __syncthreads();
  u64 before = incl - part, total = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += sh.reduce[w];
    total += sh.reduce[w];
  }
#pragma unroll
  for (int e = 0; e < kPer; ++e) sh.cum[j0 + e] = before += m[e];
  __syncthreads();
  return total;
}

// The first list entry j < n whose prefix sum reaches `need` (1 <= need <= the total).
__device__ int first_reaching(int n, u64 need, Shared& sh) {
  if (threadIdx.x == 0) sh.index = n - 1;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += kThreads)
    if (sh.cum[j] >= need && (j == 0 || sh.cum[j - 1] < need)) sh.index = j;
  __syncthreads();
  const int j = sh.index;
  __syncthreads();
  return j;
}

// Top-k's common case: the candidates (key >= floor_key) fit kListCap. They are gathered, sorted
// in the Sampler's order (bitonic sort of key << 32 | ~id, descending), and top-p, min-p and the
// draw run over the sorted list instead of more passes over the row. kNoList when they do not fit.
// `raw` is the unscaled row, raw_floor the lowest unscaled key whose scaled key is >= floor_key:
// only the candidates are divided by the temperature.
template <typename Weight, typename Fixed>
__device__ int sample_short_list(const RowView& raw, const RowView& row, unsigned raw_floor,
                                 const SampleParams& p, Weight weight, Fixed fixed, Shared& sh) {
  const int lane = threadIdx.x & 31;
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  for (int base = 0; base < row.width; base += kThreads) {  // uniform trip count
    const int i = base + static_cast<int>(threadIdx.x);
    bool in = false;
    u64 entry = 0;
    if (i < row.width) {
      const float r = raw.at(i);
      in = key_of(r) >= raw_floor;
      if (in)
        entry = (static_cast<u64>(key_of(row.scale(r))) << 32) |
                (0xffffffffu - static_cast<unsigned>(i));
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, in);
    if (ballot == 0) continue;
    const int leader = __ffs(ballot) - 1;
    int slot = 0;
    if (lane == leader) slot = atomicAdd(&sh.count, __popc(ballot));  // one atomic per warp
    slot = __shfl_sync(0xffffffffu, slot, leader) + __popc(ballot & ((1u << lane) - 1u));
    if (in && slot < kListCap) sh.list[slot] = entry;
  }
  __syncthreads();
  const int n = sh.count;
  if (n > kListCap) return kNoList;
  int n2 = 1;
  while (n2 < n) n2 <<= 1;
  for (int j = n + static_cast<int>(threadIdx.x); j < n2; j += kThreads) sh.list[j] = 0;  // last
  __syncthreads();
  for (int size = 2; size <= n2; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < n2 / 2; t += kThreads) {
        const int lo = 2 * stride * (t / stride) + t % stride, hi = lo + stride;
        const bool descending = (lo & size) == 0;  // the last merge (size n2) sorts descending
        const u64 a = sh.list[lo], b = sh.list[hi];
        if ((a < b) == descending) {
          sh.list[lo] = b;
          sh.list[hi] = a;
        }
      }
      __syncthreads();
    }
  const auto value_at = [&sh](int j) { return value_of(static_cast<unsigned>(sh.list[j] >> 32)); };
  int keep = n;
  if (p.top_p < 1.0f) {
    const u64 total = scan_list(
        n, [&](int j) { return fixed(value_at(j)); }, sh);
    const double bar = (1.0 - static_cast<double>(p.top_p)) * static_cast<double>(total);
    const u64 drop = static_cast<u64>(bar);
    keep = first_reaching(n, drop < total ? total - drop : 1, sh) + 1;
  }
  const float min_p = p.min_p;
  const u64 total = scan_list(
      n,
      [&](int j) -> u64 {
        if (j >= keep) return 0;
        const float v = value_at(j);
        return !(min_p > 0.0f) || weight(v) >= min_p ? fixed(v) : 0;
      },
      sh);
  u64 target = static_cast<u64>(p.uniform * static_cast<double>(total));
  if (target >= total) target = total - 1;
  const int j = first_reaching(n, target + 1, sh);
  return static_cast<int>(0xffffffffu - static_cast<unsigned>(sh.list[j] & 0xffffffffu));
}

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(SampleRowsArgs a) {
  __shared__ Shared sh;
  const SampleParams p = a.params[blockIdx.x];
  const int width = static_cast<int>(a.width);
  const float* x = a.x + static_cast<int64_t>(blockIdx.x) * a.width;
  SampleOut* out = a.out + blockIdx.x;

  // Greedy's answer first: the Sampler decides greedy (and the tiny-temperature rule) on the
  // unscaled row. Key: ordered value bits high, the complement of the id low (lower id wins ties).
  const RowView raw{x, width, 1.0f};
  u64 best = 0;
  for (int i = threadIdx.x; i < width; i += kThreads) {
    const float v = raw.at(i);
    if (v > -INFINITY)
      best =
          max(best, (static_cast<u64>(key_of(v)) << 32) | (0xffffffffu - static_cast<unsigned>(i)));
  }
  best = block_reduce(best, Max{}, sh);
  const int top = static_cast<int>(0xffffffffu - static_cast<unsigned>(best & 0xffffffffu));
  if (best == 0 || !(p.temperature > 0.0f)) {
    if (threadIdx.x == 0) *out = SampleOut{best == 0 ? -1 : top, 0};
    return;
  }
  const float top_value = value_of(static_cast<unsigned>(best >> 32));
  if (p.temperature != 1.0f && isfinite(top_value) &&
      !isfinite(__fdiv_rn(top_value, p.temperature))) {
    if (threadIdx.x == 0) *out = SampleOut{top, 0};
    return;
  }

  const RowView row{x, width, p.temperature};
  const float max_value = row.at(top);  // division keeps the order, so the maximum stays at top
  // Relative weight p_i / p_max as the Sampler's relative_weight (ties with a +inf maximum get 1).
  const auto weight = [max_value](float v) { return v == max_value ? 1.0f : expf(v - max_value); };
  const auto fixed = [weight](float v) {
    return static_cast<u64>(__double2ull_rn(static_cast<double>(weight(v)) * kFixedScale));
  };

  // Top-k: the k-th largest live value by a count descent; everything >= it stays (ties too).
  // The descent runs over the unscaled row: its k-th largest value divided by the temperature is
  // the scaled row's (division is monotone); when that quotient is -inf (a large negative logit
  // over a small temperature), fewer than k scaled values are live and all of them stay, as on
  // the host.
  const bool use_top_k = p.top_k > 0 && p.top_k < width;
  unsigned floor_key = kDeadKey + 1;
  if (use_top_k) {
    unsigned k = 0;
    const auto live = [](int, float, unsigned key) { return key > kDeadKey; };
    const CountOne one;
    if (descend(raw, live, one, static_cast<u64>(p.top_k), false, &k, nullptr, sh))
      floor_key = max(key_of(row.scale(value_of(k))), kDeadKey + 1);
  }
  if (use_top_k) {
    const unsigned raw_floor = lowest_unscaled_key(row, floor_key);
    const int chosen = sample_short_list(raw, row, raw_floor, p, weight, fixed, sh);
    if (chosen != kNoList) {
      if (threadIdx.x == 0) *out = SampleOut{chosen, 1};
      return;
    }
  }
  const auto candidate = [floor_key](int, float, unsigned key) { return key >= floor_key; };

  // Top-p: the lowest kept token is the first whose cumulative mass reaches total - (1 - p) *
  // total (the Sampler's "tail mass <= bar" rule); it and everything above it in order stay.
  unsigned cut_key = 0;
  int cut_index = width;
  if (p.top_p < 1.0f) {
    const u64 total = total_mass(row, candidate, fixed, sh);
    const double bar = (1.0 - static_cast<double>(p.top_p)) * static_cast<double>(total);
    const u64 drop = static_cast<u64>(bar);
    const u64 need = drop < total ? total - drop : 1;
    descend(row, candidate, fixed, need, true, &cut_key, &cut_index, sh);
  }
  const float min_p = p.min_p;
  const auto kept = [=](int i, float v, unsigned key) {
    if (key < floor_key || key < cut_key || (key == cut_key && i > cut_index)) return false;
    return !(min_p > 0.0f) || weight(v) >= min_p;
  };

  const u64 total = total_mass(row, kept, fixed, sh);
  u64 target = static_cast<u64>(p.uniform * static_cast<double>(total));
  if (target >= total) target = total - 1;  // u * total rounded up to total
  int chosen;
  if (use_top_k) {
    unsigned k = 0;
    chosen = -1;
    descend(row, kept, fixed, target + 1, true, &k, &chosen, sh);
  } else {
    chosen = draw_by_index(row, kept, fixed, target, sh);
  }
  if (threadIdx.x == 0) *out = SampleOut{chosen, 1};
}

}  // namespace

void launch_sample_rows(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const SampleRowsArgs*>(p);
  sample_rows_kernel<<<static_cast<unsigned>(a.rows), kThreads, 0, s>>>(a);
}

}  // namespace infera::cuda
