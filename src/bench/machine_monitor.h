// Probes the machine around and between a workload's repeats, in the same process: on a shared,
// noisy machine the limits a run is compared against must be measured under the same load. The
// probes' scratch memory is kept out of the workload's peak RSS.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "bench/dot_kernels.h"
#include "bench/machine_probe.h"
#include "bench/result.h"

namespace infera::bench {

struct ProbeReading {
  double bandwidth_gbs_p50 = 0;  // read bandwidth, 1e9 bytes/s
  double fma_gflops_p50 = 0;     // f32 multiply-add peak, all threads
  // The peak of the instruction the workload's matmuls use (set_matmul_kind), all threads; NaN
  // before the kind is set.
  double matmul_gflops_p50 = NAN;
};

class MachineMonitor {
 public:
  // `buffer_bytes` <= 0: default_bandwidth_buffer_bytes().
  MachineMonitor(int threads, int64_t buffer_bytes);

  // Measures read bandwidth (`bandwidth_passes` passes) and the FMA peak (`fma_samples`
  // samples), appends every sample to `result`'s "machine.read_bandwidth_gbs" and
  // "machine.fma_peak_gflops" and returns this probe's medians. The peak RSS reached before the
  // probe is remembered and the kernel's peak reset after it.
  // Once set_matmul_kind() was called, also measures that instruction's peak (`fma_samples`
  // samples; f32 reuses the FMA samples) into "machine.matmul_peak_gflops".
  ProbeReading probe(BenchResult& result, int bandwidth_passes, int fma_samples);

  // Short read-bandwidth probes between a workload's steps (decode, every few steps), so each
  // stretch of the workload has the machine's bandwidth right before and after it. The same read
  // over a buffer of the same size as probe()'s, allocated and touched once by begin_adjacent()
  // and freed by end_adjacent(); adjacent_bandwidth() reads untimed for 30 ms (the workload's
  // threads settle), then `passes` timed passes and returns their GB/s (nothing is recorded in
  // the result). The workload's peak RSS leaves the buffer out: while it is held, the peak less
  // the buffer (resident from the start: touched).
  void begin_adjacent();
  std::vector<double> adjacent_bandwidth(int passes);
  void end_adjacent();

  // The instruction the workload's matmuls run on (known once the model is loaded); probes from
  // here on measure its peak, the denominator of prefill's fraction of peak.
  void set_matmul_kind(DotKind kind) { matmul_kind_ = kind; }
  std::optional<DotKind> matmul_kind() const { return matmul_kind_; }

  // The peak RSS of the process leaving out the probes' buffers (when the kernel allowed the
  // reset: excludes_probes()).
  int64_t workload_peak_rss_bytes() const;
  bool excludes_probes() const { return resets_ok_; }

  int threads() const { return threads_; }
  int64_t buffer_bytes() const { return buffer_bytes_; }

 private:
  int threads_;
  int64_t buffer_bytes_;
  int64_t peak_before_probes_ = 0;
  bool resets_ok_ = true;
  std::optional<DotKind> matmul_kind_;
  std::unique_ptr<ReadBuffer> adjacent_;
};

}  // namespace infera::bench
