// Throwaway: decode attention at context L, 28 layers (pools exceed cache), layout variants.
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include "backend/cpu/cpu_attention.h"
using namespace infera;
using namespace infera::cpu;
int main(int argc, char** argv) {
  const int L = argc > 1 ? atoi(argv[1]) : 576, threads = argc > 2 ? atoi(argv[2]) : 2;
  const int layers = 28, hq = 16, hkv = 8, d = 128;
  ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> q(hq * d), out(hq * d);
  for (auto& x : q) x = u(rng);
  AttentionParams ap; ap.scale = 0.088f;
  auto make_batch = [&](int bs, int nblocks_used) {
    BatchDesc b; b.tokens = {1}; b.positions = {L - 1}; b.slots = {0};
    b.query_start = {0, 1}; b.seq_lens = {L}; b.max_blocks = nblocks_used;
    for (int i = 0; i < nblocks_used; ++i) b.block_table.push_back(i);
    return b;
  };
  struct Variant { const char* name; int bs; bool per_head; };
  Variant vs[] = {{"bs32 block-major", 32, false}, {"bs32 head-major", 32, true},
                  {"bs1024 block-major", 1024, false}};
  std::vector<std::vector<std::vector<float>>> pools(3);
  for (int v = 0; v < 3; ++v) {
    const int bs = vs[v].bs, nb = (L + bs - 1) / bs;
    for (int l = 0; l < layers; ++l) {
      std::vector<float> p((size_t)nb * hkv * bs * d * 2);
      for (auto& x : p) x = u(rng);
      pools[v].push_back(std::move(p));
    }
  }
  std::vector<double> tot(3, 0);
  for (int round = 0; round < 40; ++round) {
    for (int v = 0; v < 3; ++v) {
      const int bs = vs[v].bs, nb = (L + bs - 1) / bs;
      BatchDesc b = make_batch(bs, nb);
      auto t0 = std::chrono::steady_clock::now();
      for (int l = 0; l < layers; ++l) {
        float* base = pools[v][l].data();
        const size_t half = (size_t)nb * hkv * bs * d;
        if (!vs[v].per_head) {
          PagedKv kv{base, base + half, DType::F32, hkv, bs, d};
          attention_paged(pool, q.data(), hq, kv, b, ap, out.data());
        } else {
          for (int g = 0; g < hkv; ++g) {  // pool of head g: nb consecutive blocks
            const size_t hoff = (size_t)g * nb * bs * d;
            PagedKv kv{base + hoff, base + half + hoff, DType::F32, 1, bs, d};
            attention_paged(pool, q.data() + g * 2 * d, 2, kv, b, ap, out.data() + g * 2 * d);
          }
        }
      }
      auto t1 = std::chrono::steady_clock::now();
      if (round >= 5) tot[v] += std::chrono::duration<double>(t1 - t0).count();
    }
  }
  for (int v = 0; v < 3; ++v) printf("%-22s %.3f ms/token (28 layers)  ratio to first %.3f\n", vs[v].name, tot[v] / 35 * 1e3, tot[v] / tot[0]);
}
