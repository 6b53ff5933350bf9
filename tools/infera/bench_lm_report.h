// Puts a causal LM's measured speed against the machine's limits measured in the same run:
// decode against the read-bandwidth roofline, prefill against the peak multiply-add rate of the
// instruction its matmuls run on (f32 FMA, bf16 dot or int8 dot: MachineMonitor::set_matmul_kind).
#pragma once

#include <cstdint>
#include <vector>

#include "bench/machine_monitor.h"
#include "bench/result.h"
#include "bench_lm_adapter.h"

namespace infera::cli {

// Fills result.derived(): "cost_model", "roofline" (per prefill length and decode context: the
// work per token, the speed the limit allows, the fraction reached, from the p50 of the speed
// and of every machine sample of the run) and "fractions" (for the summary table).
// With `per_repeat` probes (one after each measured repeat), also adds paired metrics
// "decode.<c>.bandwidth_roofline_fraction", "prefill.<n>.fma_peak_fraction" and
// "prefill.<n>.matmul_peak_fraction": repeat r's speed against probe r, a ratio measured under the
// same machine load. Prefill's headline fraction ("fractions", "fraction_of_matmul_peak") is of
// the matmul instruction's peak ("machine.matmul_peak_gflops", its kind in
// config.machine_probe.matmul_peak_kind); the f32 FMA one stays beside it. Where decode ran with
// probes between its steps ("decode.<c>.adjacent_roofline_fraction"), roofline.decode.<c> gets
// "adjacent_probes": the median, min and max of those per-block fractions.
void derive_rooflines(bench::BenchResult& result, const LmCostModel& cost,
                      const std::vector<int64_t>& prefill, const std::vector<int64_t>& contexts,
                      int64_t decode_steps, const std::vector<bench::ProbeReading>& per_repeat);

}  // namespace infera::cli
