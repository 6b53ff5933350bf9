// Decode attention kernels of the CPU backend (simd_kernels.h), a kv head's 2 query rows (GQA 2,
// Qwen3-0.6B) against 512 f32 key / value rows of 128: both rows in one call (each key and value
// row loaded once) against one call per row (each loaded twice), alternating 41 times, over 256
// copies of K and V (128 MB: DRAM, as a decode step reads them). Session 15, one thread:
//   scores x1.18 [p10 1.16, p90 1.20], P . V x1.20 [1.18, 1.25] (20 -> 24, 23 -> 28 GB/s).
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/attention_rows_probe.cpp \
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/core/libinfera_core.a \
//       -lhwy -lpthread -o /tmp/attention_rows_probe && taskset -c 1 /tmp/attention_rows_probe
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include "backend/cpu/simd_kernels.h"
using namespace infera;
int main() {
  const int64_t d = 128, keys = 512, copies = 256;  // 64 x 2 x 256 KB = 32 MB of K and V
  std::vector<float> kv(size_t(copies * keys * d * 2));
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  for (auto& x : kv) x = nd(rng);
  std::vector<float> q(2 * d), s(2 * (keys + 8)), panel(cpu::kPanelRows * d), out(2 * d);
  for (auto& x : q) x = nd(rng);
  std::vector<float> p(2 * keys);
  for (auto& x : p) x = std::uniform_real_distribution<float>(0, 1)(rng);
  auto run = [&](bool together, bool scores) {
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < copies; ++c) {
      const float* K = kv.data() + c * keys * d * 2;
      const float* V = K + keys * d;
      if (scores) {
        if (together) cpu::matmul_rows(q.data(), 2, d, K, DType::F32, 0, keys, s.data(), keys + 8, panel.data());
        else for (int r = 0; r < 2; ++r) cpu::matmul_rows(q.data() + r * d, 1, d, K, DType::F32, 0, keys, s.data() + r * (keys + 8), keys + 8, panel.data());
      } else {
        const float* pp[2] = {p.data(), p.data() + keys}; float* oo[2] = {out.data(), out.data() + d};
        if (together) cpu::weighted_rows_sum(pp, 2, keys, V, DType::F32, d, oo, false);
        else for (int r = 0; r < 2; ++r) cpu::weighted_row_sum(pp[r], keys, V, DType::F32, d, oo[r], false);
      }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (bool scores : {true, false}) {
    std::vector<double> ratio, a, b;
    for (int rep = 0; rep < 41; ++rep) {
      const double t1 = run(false, scores), t2 = run(true, scores);
      a.push_back(t1); b.push_back(t2); ratio.push_back(t1 / t2);
    }
    std::sort(ratio.begin(), ratio.end()); std::sort(a.begin(), a.end()); std::sort(b.begin(), b.end());
    const double bytes = copies * keys * d * 4.0;
    printf("%s: one row at a time %.1f GB/s, both rows together %.1f GB/s, ratio median x%.3f [p10 %.3f, p90 %.3f]\n",
           scores ? "scores (q . K)" : "P . V", bytes / a[20] / 1e9, bytes / b[20] / 1e9, ratio[20], ratio[4], ratio[36]);
  }
}
