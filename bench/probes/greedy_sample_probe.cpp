// Sampler::sample with greedy params over Qwen3's 151,936 logits (the bench's and decode_ab's
// per-token choice): median of 200. Session 17 (Zen 4 VM): 205.7 us with the scalar NaN scrub
// and argmax, 31.0 us with core/float_scan.h's SIMD scans.
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/greedy_sample_probe.cpp \
//       build/release/src/sample/libinfera_sample.a build/release/src/core/libinfera_core.a \
//       -lhwy -o /tmp/greedy_sample_probe && /tmp/greedy_sample_probe
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include "sample/sampler.h"
using namespace infera;
int main() {
  std::vector<float> base(151936);
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  for (auto& x : base) x = nd(rng) * 3;
  SamplingParams p; p.temperature = 0;
  Sampler s(p);
  std::vector<float> l(base.size());
  std::vector<double> t;
  int64_t sink = 0;
  for (int r = 0; r < 200; ++r) {
    l = base;
    auto t0 = std::chrono::steady_clock::now();
    sink += s.sample(l, {}, {});
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  std::printf("greedy sample over %zu logits: median %.1f us p10 %.1f (sink %lld)\n", base.size(), t[100], t[20], (long long)sink);
}
