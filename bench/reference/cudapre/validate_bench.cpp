// cudapre: host time of BatchDesc::validate for S prompts of L tokens, built twice against the
// release build's libinfera_ops.a before and after the lazy-message change (src/ops/batch.cpp):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/reference/cudapre/validate_bench.cpp \
//       build/release/src/ops/libinfera_ops.a build/release/src/core/libinfera_core.a -o vb
//   ./vb 8 512      (validate_bench.txt: before/after alternating, 2 rounds)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include "ops/batch.h"
using namespace infera;
int main(int argc, char** argv) {
  const int S = atoi(argv[1]), L = atoi(argv[2]), bs = 32, nb = (L + bs - 1) / bs;
  BatchDesc d;
  d.max_blocks = nb;
  d.query_start.push_back(0);
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < L; ++i) {
      d.tokens.push_back((1000 + i * 7919) % 151936);
      d.positions.push_back(i);
      d.slots.push_back((s * nb + i / bs) * bs + i % bs);
    }
    d.query_start.push_back(int32_t(d.tokens.size()));
    d.seq_lens.push_back(L);
    for (int k = 0; k < nb; ++k) d.block_table.push_back(s * nb + k);
    d.output_rows.push_back(int32_t(d.tokens.size()) - 1);
  }
  double best = 1e9;
  for (int r = 0; r < 20; ++r) {
    auto t = std::chrono::steady_clock::now();
    d.validate(151936, 40960, S * nb, bs);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  std::printf("validate %dx%d: best of 20 %.1f us\n", S, L, best * 1e6);
}
