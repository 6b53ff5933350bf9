// The prefill int8 GEMM (matmul_int8_gemm.h) with 2 weight panels per register tile against N
// (argument 1, default 3), alternating in one process on two threads: 128 activation rows against
// Qwen3-0.6B's gate/up (3072 x 1024) and down (1024 x 3072) shapes of Q4_K, Q6_K and Q8_0 weights,
// wall time of 4 calls per sample, 15 rounds; the outputs must be the same bits.
// Session 19 (Zen 4 VM): 3 panels x1.00-1.06 median over five runs (mostly 10-15 of 15 rounds
// faster; now the default), 4 panels level (x0.99-1.01; x0.3 before the q loops' unroll pragmas
// covered 4: the accumulators went to the stack).
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/int8_gemm_panels_probe.cpp
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/quant/libinfera_quant.a
//       build/release/src/core/libinfera_core.a -lhwy -lpthread -o /tmp/int8_gemm_panels_probe
//   /tmp/int8_gemm_panels_probe [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_int8_gemm.h"
#include "backend/cpu/thread_pool.h"
#include "quant/quantize.h"

using namespace infera;

int main(int argc, char** argv) {
  const int kOther = argc > 1 ? std::atoi(argv[1]) : 3;  // against 2 panels a tile
  cpu::ThreadPool pool(2);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  const int64_t n = 128;
  struct Shape { int64_t m, k; };
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0}) {
    for (Shape s : {Shape{3072, 1024}, Shape{1024, 3072}}) {
      const int64_t rb = static_cast<int64_t>(dtype_bytes(t, static_cast<size_t>(s.k)));
      std::vector<float> wf(static_cast<size_t>(s.k)), x(static_cast<size_t>(n * s.k));
      std::vector<uint8_t> w(static_cast<size_t>(s.m * rb));
      for (int64_t r = 0; r < s.m; ++r) {
        for (auto& v : wf) v = nd(rng) * 0.05f;
        quant::quantize_row(t, wf.data(), s.k, w.data() + r * rb);
      }
      for (auto& v : x) v = nd(rng);
      std::vector<float> out2(static_cast<size_t>(n * s.m)), out3(out2.size());
      std::vector<double> ratio;
      for (int round = 0; round < 15; ++round) {
        double secs[2];
        for (int v = 0; v < 2; ++v) {
          const int panels = (round + v) % 2 ? kOther : 2;
          cpu::set_int8_panels_per_tile(panels);
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < 4; ++i)
            cpu::matmul_quantized_int8_gemm(pool, x.data(), n, s.k, w.data(), t, s.m,
                                            (panels == 2 ? out2 : out3).data());
          secs[panels == 2 ? 0 : 1] =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        ratio.push_back(secs[0] / secs[1]);
      }
      cpu::set_int8_panels_per_tile(2);
      std::sort(ratio.begin(), ratio.end());
      const bool same = std::memcmp(out2.data(), out3.data(), out2.size() * sizeof(float)) == 0;
      std::printf("%-5s %4lld x %4lld: %d panels / 2: x%.3f [%.3f, %.3f], %d of 15 faster, %s\n",
                  std::string(dtype_name(t)).c_str(), static_cast<long long>(s.m),
                  static_cast<long long>(s.k), kOther, ratio[7], ratio.front(), ratio.back(),
                  static_cast<int>(std::count_if(ratio.begin(), ratio.end(),
                                                 [](double r) { return r > 1; })),
                  same ? "the same bits" : "DIFFERENT OUTPUTS");
    }
  }
}
