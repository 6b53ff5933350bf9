// CPU matmul throughput on Qwen3-0.6B shapes: decode (1 row) is memory bound, so it reports
// GB/s of weights streamed; prefill (128 rows) is compute bound, so GFLOP/s.
//   build/release/bench/matmul_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstring>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_bf16_dot.h"

namespace {

using infera::DType;
using infera::Tensor;

void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0), m = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const bool bf16_dot = state.range(4) != 0;
  if (bf16_dot && !infera::cpu::has_bf16_dot()) {
    state.SkipWithError("this CPU has no AVX512-BF16");
    return;
  }
  auto backend = infera::make_cpu_backend(
      threads, infera::PackedAttentionSchedule::Windowed,
      bf16_dot ? infera::MatmulPrecision::BF16 : infera::MatmulPrecision::F32);
  Tensor x = backend->alloc("x", DType::F32, {n, k});
  Tensor w = backend->alloc("w", DType::BF16, {m, k});
  Tensor out = backend->alloc("out", DType::F32, {n, m});
  for (int64_t i = 0; i < n * k; ++i) x.data_as<float>()[i] = 0.001f * static_cast<float>(i % 97);
  for (int64_t i = 0; i < m * k; ++i)
    w.data_as<uint16_t>()[i] = infera::cpu::f32_to_bf16(0.01f * static_cast<float>(i % 89) - 0.4f);
  for (auto _ : state) {
    backend->matmul(x, w, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(m * k * 2),
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(2 * n * m * k) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// {rows, out_features, in_features, threads, bf16 dot products}: the LM head (151936 x 1024) and
// the MLP up/gate (3072 x 1024) of Qwen3-0.6B; f32 activations, then --matmul-precision bf16.
BENCHMARK(BM_Matmul)
    ->Args({1, 151936, 1024, 1, 0})
    ->Args({1, 151936, 1024, 2, 0})
    ->Args({1, 151936, 1024, 2, 1})
    ->Args({1, 3072, 1024, 2, 0})
    ->Args({1, 3072, 1024, 2, 1})
    ->Args({128, 3072, 1024, 2, 0})
    ->Args({128, 3072, 1024, 2, 1})
    ->Args({512, 3072, 1024, 2, 0})
    ->Args({512, 3072, 1024, 2, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
