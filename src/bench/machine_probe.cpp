#include "bench/machine_probe.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "bench/environment.h"
#include "bench/timer.h"
#include "core/huge_pages.h"
#include "infera/error.h"

namespace infera::bench {
namespace {

// A value the optimiser must assume is read, so probe loops are never removed.
volatile double g_sink = 0;

}  // namespace

std::vector<double> run_parallel_passes(int threads, int passes,
                                        const std::function<void(int, int)>& work) {
  if (threads < 1 || passes < 0) throw InvalidArgument("machine probe: bad thread or pass count");
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> marks;
  marks.reserve(static_cast<size_t>(passes) + 1);
  // The completion step runs once per phase, after the last thread arrives and before any
  // leaves: its timestamps bound each pass exactly.
  auto mark = [&marks]() noexcept { marks.push_back(Clock::now()); };
  std::barrier sync(threads, mark);
  auto body = [&](int thread) {
    for (int pass = 0; pass < passes; ++pass) {
      sync.arrive_and_wait();
      work(thread, pass);
    }
    sync.arrive_and_wait();
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(body, t);
  body(0);
  for (auto& h : helpers) h.join();
  std::vector<double> seconds;
  for (size_t i = 0; i + 1 < marks.size(); ++i)
    seconds.push_back(std::chrono::duration<double>(marks[i + 1] - marks[i]).count());
  return seconds;
}

int64_t default_bandwidth_buffer_bytes() {
  return std::max<int64_t>(int64_t{512} << 20, 16 * last_level_cache_bytes());
}

ReadBuffer::ReadBuffer(int threads, int64_t buffer_bytes) : threads_(threads) {
  constexpr int64_t kSliceAlign = 4096;  // page-aligned slices, one per thread
  if (threads < 1 || buffer_bytes < kSliceAlign * threads)
    throw InvalidArgument("bandwidth probe: buffer of " + std::to_string(buffer_bytes) +
                          " bytes is too small for " + std::to_string(threads) + " threads");
  slice_ = buffer_bytes / threads / kSliceAlign * kSliceAlign;
  // The weights' kind of pages (alloc_streamed), so that the roofline is the one they stream at.
  base_ = static_cast<float*>(alloc_streamed(static_cast<size_t>(bytes())));
  if (!base_) throw Error("bandwidth probe: cannot allocate " + std::to_string(bytes()) + " bytes");
  sums_.assign(static_cast<size_t>(threads), 0.0);
  // Each slice first-touched on its reader's thread (pages land near it).
  const size_t floats = static_cast<size_t>(slice_) / sizeof(float);
  run_parallel_passes(threads, 1, [&](int t, int) {
    float* p = base_ + static_cast<size_t>(t) * floats;
    for (size_t i = 0; i < floats; ++i) p[i] = static_cast<float>(i & 1023) * 1e-3f;
  });
}

ReadBuffer::~ReadBuffer() {
  for (double s : sums_) g_sink = g_sink + s;
  std::free(base_);
}

std::vector<double> ReadBuffer::read_passes(int passes) {
  const size_t floats = static_cast<size_t>(slice_) / sizeof(float);
  const std::vector<double> seconds = run_parallel_passes(threads_, passes, [&](int t, int) {
    sums_[static_cast<size_t>(t)] +=
        stream_read_sum(base_ + static_cast<size_t>(t) * floats, floats);
  });
  std::vector<double> gbs;
  for (double s : seconds) gbs.push_back(static_cast<double>(bytes()) / s / 1e9);
  return gbs;
}

BandwidthProbe measure_read_bandwidth(int threads, int64_t buffer_bytes, int passes) {
  ReadBuffer buffer(threads, buffer_bytes);
  buffer.read_passes(1);  // warm-up
  BandwidthProbe probe;
  probe.threads = threads;
  probe.buffer_bytes = buffer.bytes();
  probe.gb_per_s = buffer.read_passes(passes);
  return probe;
}

namespace {

// Grows a one-thread run of `chains(iterations)` until it takes long enough to time, then scales
// it to `seconds_per_sample`.
int64_t calibrate_iterations(const std::function<double(int64_t)>& chains,
                             double seconds_per_sample) {
  int64_t iterations = 1 << 16;
  double took = 0;
  for (;;) {
    Stopwatch watch;
    g_sink = g_sink + chains(iterations);
    took = watch.seconds();
    if (took > 0.02 || iterations > (int64_t{1} << 40)) break;
    iterations *= 4;
  }
  return std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(iterations) * seconds_per_sample / took));
}

}  // namespace

FmaProbe measure_fma_peak(int threads, int samples, double seconds_per_sample) {
  if (samples < 1 || !(seconds_per_sample > 0))
    throw InvalidArgument("FMA probe: need at least one sample of positive length");
  FmaProbe probe;
  probe.threads = threads;
  probe.lanes = static_cast<int64_t>(float_lanes());
  probe.iterations = calibrate_iterations(
      [](int64_t n) { return static_cast<double>(fma_chains(n, 1.0f)); }, seconds_per_sample);

  std::vector<float> results(static_cast<size_t>(threads));
  const std::vector<double> seconds = run_parallel_passes(threads, samples, [&](int t, int) {
    results[static_cast<size_t>(t)] += fma_chains(probe.iterations, 1.0f + static_cast<float>(t));
  });
  for (float r : results) g_sink = g_sink + r;
  const double flops_per_pass = 2.0 * probe.accumulators * static_cast<double>(probe.lanes) *
                                static_cast<double>(probe.iterations) * threads;
  for (double s : seconds) probe.gflops.push_back(flops_per_pass / s / 1e9);
  return probe;
}

DotProbe measure_dot_peak(DotKind kind, int threads, int samples, double seconds_per_sample) {
  DotProbe probe;
  probe.kind = kind;
  probe.threads = threads;
  if (kind == DotKind::F32Fma) {
    const FmaProbe f = measure_fma_peak(threads, samples, seconds_per_sample);
    probe.iterations = f.iterations;
    probe.gflops = f.gflops;
    return probe;
  }
  if (samples < 1 || !(seconds_per_sample > 0))
    throw InvalidArgument("dot probe: need at least one sample of positive length");
  if (!dot_kind_supported(kind))
    throw InvalidArgument(std::string("dot probe: this CPU has no ") + dot_kind_name(kind));
  probe.iterations = calibrate_iterations([kind](int64_t n) { return dot_chains(kind, n, 1.0f); },
                                          seconds_per_sample);
  std::vector<double> results(static_cast<size_t>(threads));
  const std::vector<double> seconds = run_parallel_passes(threads, samples, [&](int t, int) {
    results[static_cast<size_t>(t)] +=
        dot_chains(kind, probe.iterations, 1.0f + static_cast<float>(t));
  });
  for (double r : results) g_sink = g_sink + r;
  const double flops_per_pass = kDotAccumulators * dot_flops_per_instruction(kind) *
                                static_cast<double>(probe.iterations) * threads;
  for (double s : seconds) probe.gflops.push_back(flops_per_pass / s / 1e9);
  return probe;
}

}  // namespace infera::bench
