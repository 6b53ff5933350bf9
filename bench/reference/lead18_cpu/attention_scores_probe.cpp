// The CPU decode attention's two kernels from L2, one thread: a kv head's 2 query rows (GQA 2,
// Qwen3-0.6B) against 512 bf16 key rows of 128 (scores, matmul_rows) and the P . V weighted sum
// over 512 bf16 value rows (weighted_rows_sum), 4,000 times each. Session 18 (Zen 4 VM):
//   main:              scores 19.3-20.4 GB/s (12.5-13.3 ns a key), P . V 46.4-47.0 GB/s
//   short rows (patch): scores 27.4-27.7 GB/s ( 9.2- 9.4 ns a key), P . V the same
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/reference/lead18_cpu/attention_scores_probe.cpp \
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/core/libinfera_core.a \
//       -lhwy -lpthread -o /tmp/attention_scores_probe && taskset -c 1 /tmp/attention_scores_probe
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <cstring>
#include "backend/cpu/simd_kernels.h"
#include "hwy/base.h"
using namespace infera;
int main() {
  const int64_t d = 128, keys = 512;  // 128 KB bf16 K: L2-resident
  std::vector<uint16_t> kv(size_t(keys * d * 2));
  std::mt19937 rng(1);
  for (auto& x : kv) x = 0x3f80 + (rng() & 0x7f);
  std::vector<float> q(2 * d, 0.5f), s(2 * (keys + 8)), panel(cpu::kPanelRows * d), out(2 * d);
  std::vector<float> p(2 * keys, 0.001f);
  for (int rep = 0; rep < 3; ++rep) {
    const int iters = 4000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      cpu::matmul_rows(q.data(), 2, d, kv.data(), DType::BF16, 0, keys, s.data(), keys + 8, panel.data());
    double ts = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    const float* pp[2] = {p.data(), p.data() + keys}; float* oo[2] = {out.data(), out.data() + d};
    for (int i = 0; i < iters; ++i)
      cpu::weighted_rows_sum(pp, 2, keys, kv.data() + keys * d, DType::BF16, d, oo, false);
    double tv = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double bytes = double(iters) * keys * d * 2;
    std::printf("scores %.1f GB/s (%.1f ns/key)   P.V %.1f GB/s (%.1f ns/key)\n", bytes / ts / 1e9, ts / iters / keys * 1e9,
                bytes / tv / 1e9, tv / iters / keys * 1e9);
  }
}
