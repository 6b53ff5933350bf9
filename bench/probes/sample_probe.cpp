// Sampler::sample over Qwen3's 151,936 logits, median of 200 draws each: greedy (the bench's and
// decode_ab's per-token choice) and Qwen3's generation_config (T 0.6, top-k 20, top-p 0.95).
// Session 17 (Zen 4 VM), scalar scans -> core/float_scan.h's SIMD scans (the same draws):
//   greedy 205.7 -> 31.0 us (the NaN scrub and the argmax);
//   T 0.6 / top-k 20 / top-p 0.95 283.5 -> 87.8 us (also the top-k heap and the candidate scan
//   skipping to the next value that can matter).
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/sample_probe.cpp \
//       build/release/src/sample/libinfera_sample.a build/release/src/core/libinfera_core.a \
//       -lhwy -o /tmp/sample_probe && /tmp/sample_probe
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sample/sampler.h"

using namespace infera;

int main() {
  std::vector<float> base(151936);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& x : base) x = nd(rng) * 3;
  struct Case {
    const char* name;
    SamplingParams params;
  };
  for (const Case& c : {Case{"greedy", {.temperature = 0.0f}},
                        Case{"T 0.6 top-k 20 top-p 0.95",
                             {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .seed = 1}}}) {
    Sampler s(c.params);
    std::vector<float> l(base.size());
    std::vector<double> t;
    int64_t sink = 0;  // the draws' sum: the same before and after a change of the scans
    for (int r = 0; r < 200; ++r) {
      l = base;
      const auto t0 = std::chrono::steady_clock::now();
      sink += s.sample(l, {}, {});
      t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                      .count());
    }
    std::sort(t.begin(), t.end());
    std::printf("%-26s over %zu logits: median %.1f us, p10 %.1f (draws sum %lld)\n", c.name,
                base.size(), t[100], t[20], static_cast<long long>(sink));
  }
}
