// The adjacent probe's 128 MiB buffer against bench's 512 MiB one, alternating, same threads.
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include "bench/machine_probe.h"
int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 6;
  for (int r = 0; r < rounds; ++r) {
    for (int64_t mib : {128, 512}) {
      auto p = infera::bench::measure_read_bandwidth(threads, mib << 20, 3);
      std::sort(p.gb_per_s.begin(), p.gb_per_s.end());
      printf("%4lld MiB: %5.1f %5.1f %5.1f   ", (long long)mib, p.gb_per_s[0], p.gb_per_s[1], p.gb_per_s[2]);
    }
    printf("\n");
  }
}
