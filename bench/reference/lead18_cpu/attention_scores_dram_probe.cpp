// The decode attention's score pass from DRAM: 256 items of 2,048 bf16 keys of 128 (128 MB), a
// kv head's 2 query rows against each (matmul_rows), on 1 and 2 threads; prints "threads GB/s"
// (median of 3). Linked once against main's libinfera_cpu.a (RowStream) and once against it with
// attention_short_rows_and_value_prefetch.patch applied (Tile<2, 4>), the two binaries run in
// turn six times (session 18, Zen 4 VM):
//   RowStream: 1 thread 13.8-21.8 GB/s, 2 threads 28.1-32.4
//   Tile:      1 thread 18.7-22.1 GB/s, 2 threads 16.0-32.1 (two slow outliers)
// The same from DRAM, though Tile is x1.37 from L2: the score pass is bound by what one core's
// misses in flight fetch (~20 GB/s a stream here), not by its arithmetic.
// Build (after build/release): g++ -O2 -std=c++20 -Isrc -Iinclude THIS_FILE
//   build/release/src/backend/cpu/libinfera_cpu.a build/release/src/core/libinfera_core.a -lhwy -lpthread
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>
#include <algorithm>
#include "backend/cpu/simd_kernels.h"
using namespace infera;
int main() {
  const int64_t d = 128, keys = 2048, items = 256;  // 256 items x 512 KB bf16 = 128 MB
  std::vector<uint16_t> kv(size_t(items * keys * d));
  std::mt19937 rng(1);
  for (auto& x : kv) x = 0x3f80 + (rng() & 0x7f);
  auto run = [&](int threads) {
    auto work = [&](int t) {
      std::vector<float> q(2 * d, 0.5f), s(2 * (keys + 8)), panel(cpu::kPanelRows * d);
      for (int64_t it = t; it < items; it += threads)
        cpu::matmul_rows(q.data(), 2, d, kv.data() + it * keys * d, DType::BF16, 0, keys, s.data(), keys + 8, panel.data());
    };
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t) ts.emplace_back(work, t);
    work(0);
    for (auto& th : ts) th.join();
    return double(items) * keys * d * 2 / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
  };
  for (int threads : {1, 2}) {
    std::vector<double> a;
    for (int r = 0; r < 3; ++r) a.push_back(run(threads));
    std::sort(a.begin(), a.end());
    std::printf("%d %.2f\n", threads, a[1]);
  }
}
