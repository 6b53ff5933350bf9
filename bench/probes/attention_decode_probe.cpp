// The CPU decode attention (attention_paged) as a decode step runs it: one query row, Qwen3-0.6B's
// 16 q / 8 kv heads of 128, a bf16 cache of `context` positions in blocks of 32, 28 layers with
// pools of their own, and before each layer's attention a 2-thread read of 14 MB of other data
// (about what a layer's q4_k_m weights stream), so that the layer's keys and values come from
// DRAM as they do in a step. Prints the attention's microseconds a layer (median of steps), its
// GB/s of keys and values, and the same with the cache hot (no stream in between), for one and
// two kv heads an item (attention_paired_heads).
// Session 19 (Zen 4 VM, 2 threads): context 128 cold 22.7 / 19.1 us a layer (1 / 2 heads), hot
// 14.6 / 11.5 (the pass is compute-bound at short contexts); 2,048 cold 269 / 264 us (~31 GB/s,
// ~16 GB/s a thread, where the GEMVs reach ~27). Four heads an item (four key streams in turn,
// bench/reference/lead19_cpu/attention_four_heads.patch): 19.1 / 12.1 at 128, 301 at 2,048
// (slower: two items for two threads, and the value passes still one stream each). A pair's value
// passes together, half of head_dim a pass with both heads' rows in turn
// (attention_paired_values_half_dims.patch): 25.1 cold at 128, 342 at 2,048 (24.5 GB/s): slower.
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/attention_decode_probe.cpp
//       build/release/src/bench/libinfera_bench.a build/release/src/backend/cpu/libinfera_cpu.a
//       build/release/src/core/libinfera_core.a -lhwy -lpthread -o /tmp/attention_decode_probe
//   /tmp/attention_decode_probe [context] [steps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/thread_pool.h"
#include "bench/machine_kernels.h"
#include "core/dtype_convert.h"

using namespace infera;

int main(int argc, char** argv) {
  const int64_t context = argc > 1 ? std::atoll(argv[1]) : 128;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int64_t layers = 28, hq = 16, hkv = 8, d = 128, bs = 32;
  const int64_t blocks = (context + bs - 1) / bs;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  // Per layer: pools [hkv, blocks, bs, d] bf16 for keys and values.
  const size_t pool_elems = static_cast<size_t>(hkv * blocks * bs * d);
  std::vector<std::vector<uint16_t>> keys(layers), values(layers);
  for (int64_t l = 0; l < layers; ++l) {
    keys[l].resize(pool_elems);
    values[l].resize(pool_elems);
    for (auto& v : keys[l]) v = f32_to_bf16(nd(rng));
    for (auto& v : values[l]) v = f32_to_bf16(nd(rng));
  }
  std::vector<float> q(static_cast<size_t>(hq * d)), out(q.size());
  for (auto& v : q) v = nd(rng);
  BatchDesc batch;
  batch.tokens = {1};
  batch.positions = {static_cast<int32_t>(context - 1)};
  batch.slots = {static_cast<int32_t>(context - 1)};
  batch.query_start = {0, 1};
  batch.seq_lens = {static_cast<int32_t>(context)};
  for (int64_t b = 0; b < blocks; ++b) batch.block_table.push_back(static_cast<int32_t>(b));
  batch.max_blocks = static_cast<int32_t>(blocks);
  AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(d));
  cpu::ThreadPool pool(2);
  std::vector<float> other(size_t{14} << 18);  // 14 MB
  for (auto& v : other) v = 1.0f;
  const size_t half = other.size() / 2;
  volatile double sink = 0;
  for (const bool hot : {false, true}) {
    for (const int heads : {1, 2}) {
      cpu::set_attention_paired_heads(heads == 2);
      std::vector<double> per_layer_us;
      for (int s = 0; s < steps; ++s) {
        double total = 0;
        for (int64_t l = 0; l < layers; ++l) {
          if (!hot)
            pool.parallel_for(2, 1, [&](int64_t t, int64_t) {
              sink = sink + bench::stream_read_sum(other.data() + t * half, half);
            });
          const cpu::PagedKv kv{keys[l].data(), values[l].data(), DType::BF16, hkv, blocks, bs, d};
          const auto t0 = std::chrono::steady_clock::now();
          cpu::attention_paged(pool, q.data(), hq, kv, batch, params, out.data());
          total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        per_layer_us.push_back(total / layers * 1e6);
      }
      std::sort(per_layer_us.begin(), per_layer_us.end());
      const double us = per_layer_us[per_layer_us.size() / 2];
      const double bytes = 2.0 * hkv * context * d * 2;
      std::printf("context %lld %s, %d heads an item: %7.2f us a layer, %5.1f GB/s of keys and "
                  "values\n",
                  static_cast<long long>(context), hot ? "hot " : "cold", heads, us,
                  bytes / (us * 1e-6) / 1e9);
    }
  }
}
