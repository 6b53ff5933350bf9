// The row-group decode GEMV kernels (weight_rowgroups.h) from L2, one thread: 256 rows x k 1024 of
// Q4_K / Q8_0 / Q6_K (147-278 KB), n activation rows (argument 1, default 1), 4,000 calls, best
// of 5; GB/s of weight bytes: each kernel's compute ceiling, to set against the DRAM bandwidth a
// core gets. Session 18 (Zen 4 VM, AVX-512 VNNI, n = 1): Q4_K 35.5-37.7, Q8_0 72.5-72.7, Q6_K
// 33.5-35.9 GB/s a core; session 19's Q4_K unit (sub-block scales once a unit): Q4_K 45.4-45.6.
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/rowgroup_probe.cpp \
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/quant/libinfera_quant.a \
//       build/release/src/core/libinfera_core.a -lhwy -lpthread -o /tmp/rowgroup_probe \
//     && taskset -c 1 /tmp/rowgroup_probe [n]
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <vector>
#include <string>
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
#include "quant/quantize.h"
using namespace infera;
int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1;  // activation rows (4: a decode batch)
  const int64_t m = 256, k = 1024;
  std::mt19937 rng(7); std::normal_distribution<float> nd;
  std::vector<float> wf(m * k), x(k);
  for (auto& v : wf) v = nd(rng) * 0.05f;
  for (auto& v : x) v = nd(rng);
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::Q6_K}) {
    const int64_t rb = dtype_bytes(t, k);
    std::vector<uint8_t> w(m * rb), g(m * rb);
    for (int64_t r = 0; r < m; ++r) quant::quantize_row(t, wf.data() + r * k, k, w.data() + r * rb);
    cpu::to_rowgroups(t, w.data(), m, k, g.data());
    const int64_t act_bytes = cpu::activation_row_bytes(t, k);
    std::vector<uint8_t> acts(n * act_bytes);
    for (int64_t i = 0; i < n; ++i)
      cpu::quantize_activation_row(t, x.data(), k, acts.data() + i * act_bytes);
    std::vector<float> out(n * m);
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const int iters = 4000;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i)
        cpu::matmul_rows_rowgroups(t, acts.data(), n, k, g.data(), 0, m, out.data(), m);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, double(iters) * m * rb / s / 1e9);
    }
    double sum = 0; for (float v : out) sum += v;
    std::printf("%-5s n=%lld %6.1f GB/s of weights (best of 5)  checksum %.6g\n",
                std::string(dtype_name(t)).c_str(), static_cast<long long>(n), best, sum);
  }
}
