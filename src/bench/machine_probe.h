// What the machine can do, measured in the same run as a workload so the workload can be stated
// as a fraction of it: memory read bandwidth (the decode roofline) and the peak f32 multiply-add
// rate (the prefill roofline). Both run on the same thread count as the workload.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bench/dot_kernels.h"
#include "bench/machine_kernels.h"

namespace infera::bench {

// Runs work(thread, pass) on `threads` threads for `passes` passes; every pass starts on all
// threads together. Returns each pass's wall seconds, from the moment all threads are ready to
// the moment the last one finishes. `work` must not throw.
std::vector<double> run_parallel_passes(int threads, int passes,
                                        const std::function<void(int thread, int pass)>& work);

struct BandwidthProbe {
  int threads = 1;
  int64_t buffer_bytes = 0;      // far larger than the last-level cache
  std::vector<double> gb_per_s;  // one sample per pass over the whole buffer, 1e9 bytes/s
};

// A buffer for timed read passes: `buffer_bytes` cut into one page-aligned slice per thread,
// each first-touched by the thread that reads it. Kept between passes, so repeated probes (between
// a workload's steps) pay the page faults once.
class ReadBuffer {
 public:
  ReadBuffer(int threads, int64_t buffer_bytes);
  ~ReadBuffer();
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;
  // `passes` passes over the whole buffer, every thread its slice (the read of StreamReadSum:
  // four streams in lockstep per thread); GB/s (1e9 bytes/s) of each.
  std::vector<double> read_passes(int passes);
  int64_t bytes() const { return slice_ * threads_; }

 private:
  int threads_;
  int64_t slice_;
  float* base_;
  std::vector<double> sums_;
};

// Streams a `buffer_bytes` buffer (each thread reads its own contiguous slice, first-touched by
// that thread) `passes` times after one untimed warm-up pass.
BandwidthProbe measure_read_bandwidth(int threads, int64_t buffer_bytes, int passes);

// The default probe buffer: 16x the last-level cache, at least 512 MiB, so no pass is served
// from cache.
int64_t default_bandwidth_buffer_bytes();

struct FmaProbe {
  int threads = 1;
  int accumulators = kFmaAccumulators;
  int64_t lanes = 0;           // f32 lanes per vector on the dispatched target
  int64_t iterations = 0;      // per thread per sample
  std::vector<double> gflops;  // all threads together, one sample per pass
};

// Runs the register-resident FMA chains on every thread at once, each sample about
// `seconds_per_sample` long (calibrated on one thread first).
FmaProbe measure_fma_peak(int threads, int samples, double seconds_per_sample);

struct DotProbe {
  DotKind kind = DotKind::F32Fma;
  int threads = 1;
  int64_t iterations = 0;      // per thread per sample
  std::vector<double> gflops;  // all threads together, one sample per pass
};

// The peak rate of `kind`'s instruction, measured as measure_fma_peak measures f32 (F32Fma runs
// exactly that). InvalidArgument where the CPU lacks the instruction (dot_kind_supported).
DotProbe measure_dot_peak(DotKind kind, int threads, int samples, double seconds_per_sample);

}  // namespace infera::bench
