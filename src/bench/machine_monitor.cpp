#include "bench/machine_monitor.h"

#include <algorithm>

#include "bench/machine_probe.h"
#include "bench/process_usage.h"
#include "bench/timer.h"
#include "infera/error.h"

namespace infera::bench {

MachineMonitor::MachineMonitor(int threads, int64_t buffer_bytes)
    : threads_(threads),
      buffer_bytes_(buffer_bytes > 0 ? buffer_bytes : default_bandwidth_buffer_bytes()) {}

ProbeReading MachineMonitor::probe(BenchResult& result, int bandwidth_passes, int fma_samples) {
  peak_before_probes_ = std::max(peak_before_probes_, peak_rss_bytes());
  const double cpu_start = process_cpu_seconds();
  const Stopwatch wall;
  const BandwidthProbe bw = measure_read_bandwidth(threads_, buffer_bytes_, bandwidth_passes);
  const FmaProbe fma = measure_fma_peak(threads_, fma_samples, 0.2);
  std::vector<double> matmul_gflops;
  if (matmul_kind_)
    matmul_gflops = *matmul_kind_ == DotKind::F32Fma
                        ? fma.gflops
                        : measure_dot_peak(*matmul_kind_, threads_, fma_samples, 0.2).gflops;
  // As run.cpu_share for the workload: the probes' limits are only comparable with the
  // workload's speed when both got a similar share of the cores.
  result.series("machine.probe_cpu_share", "fraction", true, false)
      .samples.push_back((process_cpu_seconds() - cpu_start) / (wall.seconds() * threads_));
  // The buffer is freed: the peak from here on is the workload's again.
  resets_ok_ = reset_peak_rss() && resets_ok_;

  Metric& bw_metric = result.series("machine.read_bandwidth_gbs", "GB/s", true);
  bw_metric.samples.insert(bw_metric.samples.end(), bw.gb_per_s.begin(), bw.gb_per_s.end());
  Metric& fma_metric = result.series("machine.fma_peak_gflops", "GFLOP/s", true);
  fma_metric.samples.insert(fma_metric.samples.end(), fma.gflops.begin(), fma.gflops.end());
  result.config()["machine_probe"] = {{"threads", threads_},
                                      {"bandwidth_buffer_bytes", bw.buffer_bytes},
                                      {"fma_accumulators", fma.accumulators},
                                      {"fma_f32_lanes", fma.lanes},
                                      {"fma_iterations_per_sample", fma.iterations}};
  ProbeReading reading{summarize(bw.gb_per_s).p50, summarize(fma.gflops).p50};
  if (matmul_kind_) {
    Metric& m = result.series("machine.matmul_peak_gflops", "GFLOP/s", true);
    m.samples.insert(m.samples.end(), matmul_gflops.begin(), matmul_gflops.end());
    result.config()["machine_probe"]["matmul_peak_kind"] = dot_kind_name(*matmul_kind_);
    reading.matmul_gflops_p50 = summarize(matmul_gflops).p50;
  }
  return reading;
}

void MachineMonitor::begin_adjacent() {
  end_adjacent();
  peak_before_probes_ = std::max(peak_before_probes_, peak_rss_bytes());
  adjacent_ = std::make_unique<ReadBuffer>(threads_, buffer_bytes_);
  adjacent_->read_passes(1);  // warm-up
}

std::vector<double> MachineMonitor::adjacent_bandwidth(int passes) {
  if (!adjacent_) throw InvalidArgument("adjacent_bandwidth() outside begin/end_adjacent()");
  // Untimed passes for 30 ms first: right after decode steps the first pass read 34-49 GB/s
  // where the second read 68-82 (2 threads, bf16). The CPU backend's pool workers spin-yield for
  // ~10-20 ms after a section: a yielding thread counts as runnable, so the scheduler may keep
  // both probe threads on the other core until the worker sleeps.
  const Stopwatch warm;
  do adjacent_->read_passes(1);
  while (warm.seconds() < 0.03);
  return adjacent_->read_passes(passes);
}

void MachineMonitor::end_adjacent() {
  if (!adjacent_) return;
  // The buffer was resident from its first touch to here: the peak less it is the workload's.
  peak_before_probes_ = std::max(peak_before_probes_, peak_rss_bytes() - adjacent_->bytes());
  adjacent_.reset();
  resets_ok_ = reset_peak_rss() && resets_ok_;
}

int64_t MachineMonitor::workload_peak_rss_bytes() const {
  return std::max(peak_before_probes_, peak_rss_bytes());
}

}  // namespace infera::bench
