// The machine probes compute what they claim (checked against scalar loops); their speed is
// never asserted, only that every sample is a finite positive number.
#include "bench/machine_probe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/environment.h"
#include "bench/process_usage.h"

namespace infera::bench {
namespace {

TEST(MachineProbe, ParallelPassesRunEveryThreadOncePerPass) {
  std::vector<std::atomic<int>> calls(3 * 4);
  const std::vector<double> seconds = run_parallel_passes(
      3, 4, [&](int thread, int pass) { calls[static_cast<size_t>(pass * 3 + thread)]++; });
  ASSERT_EQ(seconds.size(), 4u);
  for (double s : seconds) EXPECT_TRUE(std::isfinite(s) && s >= 0) << s;
  for (auto& c : calls) EXPECT_EQ(c.load(), 1);
  EXPECT_TRUE(run_parallel_passes(2, 0, [](int, int) {}).empty());
}

TEST(MachineProbe, StreamReadSumEqualsScalarSum) {
  // Small integers sum exactly in float and double whatever the order. Lengths cover no main
  // loop, the four-quarter main loop and the scalar tail after it.
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{129}, size_t{4099}, size_t{12345}}) {
    const size_t bytes = ((n + 16) * sizeof(float) + 63) / 64 * 64;  // a multiple of the alignment
    std::unique_ptr<float, decltype(&std::free)> p(
        static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free);
    double expected = 0;
    for (size_t i = 0; i < n; ++i) {
      p.get()[i] = static_cast<float>(i % 7) - 3.0f;
      expected += p.get()[i];
    }
    EXPECT_EQ(stream_read_sum(p.get(), n), expected) << "n=" << n;
  }
}

TEST(MachineProbe, FmaChainsEqualScalarRecurrence) {
  // Each chain runs a <- a * 0.999 + seed * 0.001 from seed + j; the result sums the 12 chains
  // (pairwise, as the kernel does) over every lane. std::fma is the reference for a fused
  // multiply-add; 1e-5 relative allows targets whose MulAdd is not fused.
  const int64_t iterations = 1000;
  const float seed = 2.0f;
  std::vector<float> a(kFmaAccumulators);
  for (int j = 0; j < kFmaAccumulators; ++j) {
    a[static_cast<size_t>(j)] = seed + static_cast<float>(j);
    for (int64_t i = 0; i < iterations; ++i)
      a[static_cast<size_t>(j)] = std::fma(a[static_cast<size_t>(j)], 0.999f, seed * 0.001f);
  }
  const float chains = (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) +
                       ((a[8] + a[9]) + (a[10] + a[11]));
  const double expected = static_cast<double>(chains) * static_cast<double>(float_lanes());
  EXPECT_NEAR(fma_chains(iterations, seed), expected, 1e-5 * std::abs(expected));
}

TEST(MachineProbe, ProbesReturnOneFinitePositiveSamplePerPass) {
  const BandwidthProbe bw = measure_read_bandwidth(2, 8 << 20, 3);
  EXPECT_EQ(bw.threads, 2);
  EXPECT_EQ(bw.buffer_bytes, 8 << 20);
  ASSERT_EQ(bw.gb_per_s.size(), 3u);
  for (double v : bw.gb_per_s) EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  EXPECT_THROW(measure_read_bandwidth(2, 100, 1), std::exception);

  const FmaProbe fma = measure_fma_peak(2, 2, 0.005);
  EXPECT_EQ(fma.accumulators, kFmaAccumulators);
  EXPECT_EQ(fma.lanes, static_cast<int64_t>(float_lanes()));
  EXPECT_GT(fma.iterations, 0);
  ASSERT_EQ(fma.gflops.size(), 2u);
  for (double v : fma.gflops) EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
}

TEST(MachineProbe, DotChainsEqualScalarSums) {
  // Accumulator j of each of the 16 lanes starts at seed + j and adds, per step, the pair sum
  // 0.5 * 0.25 * 2 = 0.25 (bf16) or the quad sum 4 x 1 x 1 = 4 (int8); every value is exact.
  const int64_t iterations = 1000;
  double bf16 = 0, int8 = 0;
  for (int j = 0; j < kDotAccumulators; ++j) {
    bf16 += 16 * (2.0 + j + 0.25 * iterations);
    int8 += 16 * (2.0 + j + 4.0 * iterations);
  }
  EXPECT_THROW(dot_chains(DotKind::F32Fma, 10, 2.0f), std::exception);
  int ran = 0;
  if (dot_kind_supported(DotKind::Bf16Dot)) {
    EXPECT_EQ(dot_chains(DotKind::Bf16Dot, iterations, 2.0f), bf16);
    ++ran;
  } else {
    EXPECT_THROW(dot_chains(DotKind::Bf16Dot, 10, 2.0f), std::exception);
  }
  if (dot_kind_supported(DotKind::Int8Dot)) {
    EXPECT_EQ(dot_chains(DotKind::Int8Dot, iterations, 2.0f), int8);
    ++ran;
  } else {
    EXPECT_THROW(dot_chains(DotKind::Int8Dot, 10, 2.0f), std::exception);
  }
  if (ran == 0) GTEST_SKIP() << "this CPU has neither AVX512-BF16 nor AVX512-VNNI";
}

TEST(MachineProbe, DotPeakOfEachSupportedKind) {
  for (DotKind kind : {DotKind::F32Fma, DotKind::Bf16Dot, DotKind::Int8Dot}) {
    if (!dot_kind_supported(kind)) {
      EXPECT_THROW(measure_dot_peak(kind, 2, 1, 0.005), std::exception) << dot_kind_name(kind);
      continue;
    }
    const DotProbe p = measure_dot_peak(kind, 2, 2, 0.005);
    EXPECT_EQ(p.kind, kind);
    EXPECT_GT(p.iterations, 0);
    ASSERT_EQ(p.gflops.size(), 2u);
    for (double v : p.gflops) EXPECT_TRUE(std::isfinite(v) && v > 0) << dot_kind_name(kind);
  }
  EXPECT_THROW(measure_dot_peak(DotKind::Bf16Dot, 2, 0, 0.005), std::exception);
}

TEST(BenchEnvironment, NamesBuildAndMachine) {
  const nlohmann::json env = capture_environment();
  for (const char* key : {"git_revision", "compiler", "cxx_flags", "build_type", "cpu_model",
                          "simd_dispatch_target", "os", "created_utc"}) {
    ASSERT_TRUE(env.contains(key) && env[key].is_string()) << key;
  }
  EXPECT_FALSE(env["compiler"].get<std::string>().empty());
  EXPECT_EQ(env["simd_dispatch_target"], simd_target_name());
  // A 40-hex-digit revision when built from a git checkout, else "unknown".
  const std::string rev = env["git_revision"];
  EXPECT_TRUE(rev == "unknown" || rev.size() == 40) << rev;
  EXPECT_TRUE(env["cpu_simd_flags"].is_array());
}

TEST(BenchMemory, PeakIsAtLeastCurrent) {
  const int64_t current = current_rss_bytes();
  const int64_t peak = peak_rss_bytes();
  EXPECT_GT(current, 0);
  EXPECT_GE(peak, current);
  // Touch 64 MiB: the peak must see it.
  {
    char* volatile big = static_cast<char*>(std::malloc(64 << 20));  // volatile: not elided
    ASSERT_NE(big, nullptr);
    std::memset(big, 1, 64 << 20);
    EXPECT_GE(peak_rss_bytes(), current + (32 << 20));
    std::free(big);
  }
  // A reset brings the peak down to the RSS of the moment (the freed block is gone from it with
  // glibc; ASan keeps freed memory in quarantine, so compare with the RSS, not with `current`).
  if (reset_peak_rss()) EXPECT_LE(peak_rss_bytes(), current_rss_bytes() + (4 << 20));
}

TEST(BenchProcess, CpuTimeAdvancesWithWorkAndLoadIsReadable) {
  const double before = process_cpu_seconds();
  ASSERT_TRUE(std::isfinite(before));
  volatile double x = 0;
  while (process_cpu_seconds() - before < 0.01) x = x + 1;  // spins until 10 ms of CPU passed
  EXPECT_GE(process_cpu_seconds() - before, 0.01);
  const double load = load_average_1min();
  EXPECT_TRUE(std::isfinite(load) && load >= 0) << load;
}

}  // namespace
}  // namespace infera::bench
