// Cost of one ThreadPool section with (almost) no work: what every decode GEMV, attention and
// fused section pays on top of its bytes (~158 sections per Qwen3-0.6B token). Measures
// parallel_for(2 chunks) and parallel_items(items) back to back, with a small serial gap between
// sections like the norms / quantization between decode GEMVs. Median and p90 of 200 x 2000.
// Session 17 (Zen 4 VM, 2 threads): parallel_for 0.63 us (p90 0.75), parallel_items 0.74 us; with
// a 2 us gap 1.00 / 1.08 us. So the pool's own cost is ~1 us of the ~5 us a decode GEMV section
// loses (timers in the pool, q4_k_m at context 128: 2.3-2.8 us of serial ops before each GEMV
// section and 2-3 us waiting for the other thread at its end; 7-8 us before each attention).
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc bench/probes/pool_section_probe.cpp \
//       build/release/src/backend/cpu/libinfera_cpu.a -lpthread -o /tmp/pp && /tmp/pp
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "backend/cpu/thread_pool.h"

using Clock = std::chrono::steady_clock;

static void spin_ns(int64_t ns) {
  const auto end = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < end) {
  }
}

int main() {
  infera::cpu::ThreadPool pool(2);
  std::atomic<int64_t> sink{0};
  for (int64_t gap : {0, 2000}) {
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<double> per;
      for (int rep = 0; rep < 200; ++rep) {
        const auto t0 = Clock::now();
        for (int i = 0; i < 2000; ++i) {
          if (kind == 0)
            pool.parallel_for(2, 1, [&](int64_t b, int64_t e) { sink.fetch_add(e - b); });
          else
            pool.parallel_items(8, [&](int64_t item) { sink.fetch_add(item); });
          if (gap) spin_ns(gap);
        }
        per.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2000 -
                      gap / 1000.0);
      }
      std::sort(per.begin(), per.end());
      std::printf("%-14s gap %4lld ns: median %.2f us p90 %.2f us per section\n",
                  kind == 0 ? "parallel_for" : "parallel_items", (long long)gap, per[100], per[180]);
    }
  }
  return sink.load() == 42 ? 1 : 0;
}
