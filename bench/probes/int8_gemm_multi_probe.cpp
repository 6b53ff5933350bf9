// The prefill q/k/v projections (Qwen3-0.6B: 2048, 1024 and 1024 rows x 1024, Q4_K, 128 rows of
// x) as three matmul_quantized calls (x quantized three times) against one
// matmul_quantized_multi (the int8 GEMM quantizes x once for the three), alternating, 5 calls a
// sample, 30 rounds, two threads. Session 19 (Zen 4 VM): x1.044 and x1.159 median (29 and 30 of 30
// rounds faster).
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/int8_gemm_multi_probe.cpp
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/quant/libinfera_quant.a
//       build/release/src/core/libinfera_core.a -lhwy -lpthread -o /tmp/int8_gemm_multi_probe
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/thread_pool.h"
#include "quant/quantize.h"
using namespace infera;
int main() {
  cpu::ThreadPool pool(2);
  std::mt19937 rng(3); std::normal_distribution<float> nd;
  const int64_t n = 128, k = 1024;
  const int64_t ms[3] = {2048, 1024, 1024};
  std::vector<std::vector<uint8_t>> w(3);
  std::vector<std::vector<float>> out(3);
  const int64_t rb = dtype_bytes(DType::Q4_K, k);
  std::vector<float> row(k), x(n * k);
  for (int i = 0; i < 3; ++i) {
    w[i].resize(ms[i] * rb); out[i].resize(n * ms[i]);
    for (int64_t r = 0; r < ms[i]; ++r) { for (auto& v : row) v = nd(rng) * 0.05f; quant::quantize_row(DType::Q4_K, row.data(), k, w[i].data() + r * rb); }
  }
  for (auto& v : x) v = nd(rng);
  std::vector<double> ratio;
  for (int round = 0; round < 30; ++round) {
    double t[2];
    for (int v = 0; v < 2; ++v) {
      const int mode = (round + v) % 2;
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 5; ++it) {
        if (mode == 0) for (int i = 0; i < 3; ++i) cpu::matmul_quantized(pool, x.data(), n, k, w[i].data(), DType::Q4_K, ms[i], out[i].data());
        else { cpu::QuantMatmulJob jobs[3]; for (int i = 0; i < 3; ++i) jobs[i] = {w[i].data(), DType::Q4_K, ms[i], out[i].data(), cpu::WeightLayout::Rows}; cpu::matmul_quantized_multi(pool, x.data(), n, k, jobs, 3); }
      }
      t[mode] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    ratio.push_back(t[0] / t[1]);
  }
  std::sort(ratio.begin(), ratio.end());
  std::printf("q/k/v Q4_K, 128 rows: one quantization / three: x%.3f [%.3f, %.3f], %d of 30 faster\n", ratio[15], ratio[0], ratio[29], (int)std::count_if(ratio.begin(), ratio.end(), [](double r){return r > 1;}));
}
