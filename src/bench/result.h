// One benchmark run as a JSON document: what ran (benchmark, command, config), where (the
// environment), the measured metrics with raw samples and summaries, and derived figures
// (roofline fractions). bench/results/README.md documents the format for readers and plotters.
#pragma once

#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace infera::bench {

inline constexpr const char* kResultSchema = "infera.bench/1";

class BenchResult {
 public:
  explicit BenchResult(std::string benchmark) : benchmark_(std::move(benchmark)) {}

  // Adds a metric; throws InvalidArgument when the name is already taken or empty.
  Metric& add_metric(Metric metric);
  // The metric called `name`, created empty on first use; InvalidArgument if it exists with
  // another unit or direction. References stay valid as metrics are added.
  Metric& series(const std::string& name, const std::string& unit, bool higher_is_better,
                 bool headline = true);
  const Metric* find_metric(const std::string& name) const;
  const std::deque<Metric>& metrics() const { return metrics_; }

  // Free-form sections: what was asked for, where it ran, and figures derived from metrics.
  nlohmann::json& config() { return config_; }
  nlohmann::json& environment() { return environment_; }
  nlohmann::json& derived() { return derived_; }
  const nlohmann::json& derived() const { return derived_; }
  void set_command(std::string command) { command_ = std::move(command); }
  void set_label(std::string label) { label_ = std::move(label); }
  const std::string& label() const { return label_; }
  const std::string& benchmark() const { return benchmark_; }

  nlohmann::ordered_json to_json() const;

 private:
  std::string benchmark_, label_, command_;
  std::deque<Metric> metrics_;  // in the order recorded
  nlohmann::json config_ = nlohmann::json::object();
  nlohmann::json environment_ = nlohmann::json::object();
  nlohmann::json derived_ = nlohmann::json::object();
};

// A number for JSON: non-finite values become null (JSON has no NaN).
nlohmann::json json_number(double value);
nlohmann::ordered_json summary_json(const Summary& s);

// Writes `result` to `dir`/<benchmark>[_<label>]_<UTC time>.json (creating `dir`, never
// overwriting: a numeric suffix is added on collision) and returns the path. IoError on failure.
std::filesystem::path write_result(const BenchResult& result, const std::filesystem::path& dir);
// Writes `result` to exactly `path` (its folder is created). IoError on failure.
void write_result_file(const BenchResult& result, const std::filesystem::path& path);

}  // namespace infera::bench
