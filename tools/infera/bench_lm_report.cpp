#include "bench_lm_report.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace infera::cli {
namespace {

double p50(const bench::BenchResult& r, const std::string& name) {
  const bench::Metric* m = r.find_metric(name);
  return m ? m->summary().p50 : NAN;
}

// Repeat r's speed (sample r of `metric`) times `work_per_token` over limit r.
void add_paired_fraction(bench::BenchResult& r, const std::string& metric, const std::string& name,
                         double work_per_token, const std::vector<double>& limits) {
  const bench::Metric* speed = r.find_metric(metric);
  if (!speed || limits.empty() || speed->samples.size() != limits.size()) return;
  bench::Metric& f = r.series(name, "fraction", true, false);
  for (size_t i = 0; i < limits.size(); ++i)
    f.samples.push_back(speed->samples[i] * work_per_token / limits[i]);
}

std::string describe(const char* what, double value, const char* unit) {
  char text[80];
  std::snprintf(text, sizeof text, "%s %.4g %s", what, value, unit);
  return text;
}

}  // namespace

void derive_rooflines(bench::BenchResult& result, const LmCostModel& cost,
                      const std::vector<int64_t>& prefill, const std::vector<int64_t>& contexts,
                      int64_t decode_steps, const std::vector<bench::ProbeReading>& per_repeat) {
  using bench::json_number;
  nlohmann::json& d = result.derived();
  d["cost_model"] = {{"weight_bytes_per_decode_token", cost.weight_bytes_per_decode_token},
                     {"kv_bytes_per_position", cost.kv_bytes_per_position},
                     {"flops_per_prompt_token", cost.flops_per_token},
                     {"lm_head_flops", cost.lm_head_flops},
                     {"attention_flops_per_query_key_pair", cost.attention_flops_per_pair}};
  const double bandwidth = p50(result, "machine.read_bandwidth_gbs");  // GB/s
  const double peak = p50(result, "machine.fma_peak_gflops");          // GFLOP/s
  // The matmuls' own instruction, as the monitor recorded it; without its samples (no probe
  // after the load) the f32 peak.
  const nlohmann::json& config = result.config();
  const auto probe = config.find("machine_probe");
  const bool own = result.find_metric("machine.matmul_peak_gflops") != nullptr &&
                   probe != config.end() && probe->contains("matmul_peak_kind");
  const double matmul_peak = own ? p50(result, "machine.matmul_peak_gflops") : peak;
  const std::string matmul_name =
      (own ? probe->at("matmul_peak_kind").get<std::string>()
           : std::string(bench::dot_kind_name(bench::DotKind::F32Fma))) +
      " peak";
  d["roofline"] = {{"read_bandwidth_gbs_p50", json_number(bandwidth)},
                   {"fma_peak_gflops_p50", json_number(peak)},
                   {"matmul_peak_kind", matmul_name},
                   {"matmul_peak_gflops_p50", json_number(matmul_peak)},
                   {"decode", nlohmann::json::object()},
                   {"prefill", nlohmann::json::object()}};
  nlohmann::json& fractions = d["fractions"] = nlohmann::json::object();

  std::vector<double> bandwidths, peaks, matmul_peaks;  // bytes/s and FLOP/s per repeat
  for (const bench::ProbeReading& p : per_repeat) {
    bandwidths.push_back(p.bandwidth_gbs_p50 * 1e9);
    peaks.push_back(p.fma_gflops_p50 * 1e9);
    if (std::isfinite(p.matmul_gflops_p50)) matmul_peaks.push_back(p.matmul_gflops_p50 * 1e9);
  }

  for (int64_t c : contexts) {
    // Step s (0-based) feeds position c + s and reads the K/V of c + s + 1 positions.
    double bytes = 0;
    for (int64_t s = 0; s < decode_steps; ++s) bytes += cost.decode_bytes(c + s + 1);
    bytes /= static_cast<double>(decode_steps);
    const std::string metric = "decode." + std::to_string(c) + ".tokens_per_second";
    const double tps = p50(result, metric);
    const double limit_tps = bandwidth * 1e9 / bytes;
    const double fraction = tps / limit_tps;
    d["roofline"]["decode"][std::to_string(c)] = {
        {"bytes_per_token", bytes},
        {"tokens_per_second_p50", json_number(tps)},
        {"roofline_tokens_per_second", json_number(limit_tps)},
        {"fraction_of_bandwidth_roofline", json_number(fraction)}};
    if (std::isfinite(fraction))
      fractions[metric] = {{"fraction", fraction},
                           {"of", describe("read bandwidth", bandwidth, "GB/s")}};
    add_paired_fraction(result, metric,
                        "decode." + std::to_string(c) + ".bandwidth_roofline_fraction", bytes,
                        bandwidths);
    // Blocks of steps against the probes on either side of each (cmd_bench.cpp): the fraction
    // least moved by the machine's bandwidth swings; its spread says how much they moved.
    const std::string p = "decode." + std::to_string(c) + ".";
    if (const bench::Metric* f = result.find_metric(p + "adjacent_roofline_fraction")) {
      const bench::Summary s = f->summary();
      d["roofline"]["decode"][std::to_string(c)]["adjacent_probes"] = {
          {"blocks", s.count},
          {"fraction_p50", json_number(s.p50)},
          {"fraction_min", json_number(s.min)},
          {"fraction_max", json_number(s.max)},
          {"bandwidth_gbs_p50", json_number(p50(result, p + "adjacent_bandwidth_gbs"))},
          {"block_tokens_per_second_p50", json_number(p50(result, p + "block_tokens_per_second"))}};
    }
  }
  for (int64_t n : prefill) {
    const double flops = cost.prefill_flops(n);
    const std::string metric = "prefill." + std::to_string(n) + ".tokens_per_second";
    const double tps = p50(result, metric);
    const double gflops = flops * tps / static_cast<double>(n) / 1e9;
    const double fraction = gflops / matmul_peak;
    d["roofline"]["prefill"][std::to_string(n)] = {
        {"flops", flops},
        {"gflops_p50", json_number(gflops)},
        {"fraction_of_fma_peak", json_number(gflops / peak)},
        {"fraction_of_matmul_peak", json_number(fraction)}};
    if (std::isfinite(fraction))
      fractions[metric] = {{"fraction", fraction},
                           {"of", describe(matmul_name.c_str(), matmul_peak, "GFLOP/s")}};
    const std::string p = "prefill." + std::to_string(n);
    add_paired_fraction(result, metric, p + ".fma_peak_fraction", flops / static_cast<double>(n),
                        peaks);
    if (matmul_peaks.size() == peaks.size())
      add_paired_fraction(result, metric, p + ".matmul_peak_fraction",
                          flops / static_cast<double>(n), matmul_peaks);
  }
}

}  // namespace infera::cli
