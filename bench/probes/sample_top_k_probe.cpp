// Sampler::sample with Qwen3's generation_config (T 0.6, top-k 20, top-p 0.95) over 151,936
// logits: median of 200 draws (the same ids before and after). Session 17 (Zen 4 VM): 283.5 us
// with scalar scans, 87.8 us with core/float_scan.h's (the NaN scrub, the top-k heap skipping to
// the next value above its least, the candidates at or above the floor).
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/sample_top_k_probe.cpp \
//       build/release/src/sample/libinfera_sample.a build/release/src/core/libinfera_core.a \
//       -lhwy -o /tmp/sample_top_k_probe && /tmp/sample_top_k_probe
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
  SamplingParams p; p.temperature = 0.6f; p.top_k = 20; p.top_p = 0.95f; p.seed = 1;
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
  std::printf("top-k 20 top-p 0.95 T 0.6 sample over %zu logits: median %.1f us p10 %.1f (sink %lld)\n", base.size(), t[100], t[20], (long long)sink);
}
