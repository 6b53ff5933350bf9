#include "bench/result.h"

#include <cctype>
#include <cmath>
#include <ctime>
#include <fstream>
#include <system_error>

#include "infera/error.h"

namespace infera::bench {

Metric& BenchResult::add_metric(Metric metric) {
  if (metric.name.empty()) throw InvalidArgument("benchmark metric without a name");
  if (find_metric(metric.name))
    throw InvalidArgument("benchmark metric '" + metric.name + "' recorded twice");
  metrics_.push_back(std::move(metric));
  return metrics_.back();
}

Metric& BenchResult::series(const std::string& name, const std::string& unit, bool higher_is_better,
                            bool headline) {
  for (Metric& m : metrics_) {
    if (m.name != name) continue;
    if (m.unit != unit || m.higher_is_better != higher_is_better)
      throw InvalidArgument("benchmark metric '" + name +
                            "' recorded with two units or directions");
    return m;
  }
  return add_metric({.name = name,
                     .unit = unit,
                     .higher_is_better = higher_is_better,
                     .headline = headline,
                     .samples = {}});
}

const Metric* BenchResult::find_metric(const std::string& name) const {
  for (const Metric& m : metrics_)
    if (m.name == name) return &m;
  return nullptr;
}

nlohmann::json json_number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::ordered_json summary_json(const Summary& s) {
  auto number = [](double v) {
    return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
  };
  return {{"count", s.count},      {"invalid", s.invalid}, {"min", number(s.min)},
          {"p50", number(s.p50)},  {"p95", number(s.p95)}, {"max", number(s.max)},
          {"mean", number(s.mean)}};
}

nlohmann::ordered_json BenchResult::to_json() const {
  using ordered = nlohmann::ordered_json;
  // Ordered: the file reads top-down (what ran, where, the metrics in the order recorded).
  ordered metrics = ordered::object();
  for (const Metric& m : metrics_) {
    ordered samples = ordered::array();
    for (double v : m.samples) samples.push_back(std::isfinite(v) ? ordered(v) : ordered(nullptr));
    metrics[m.name] = {{"unit", m.unit},
                       {"better", m.higher_is_better ? "higher" : "lower"},
                       {"headline", m.headline},
                       {"summary", summary_json(m.summary())},
                       {"samples", std::move(samples)}};
  }
  return {{"schema", kResultSchema},
          {"benchmark", benchmark_},
          {"label", label_},
          {"command", command_},
          {"environment", ordered::parse(environment_.dump())},
          {"config", ordered::parse(config_.dump())},
          {"metrics", std::move(metrics)},
          {"derived", ordered::parse(derived_.dump())}};
}

std::filesystem::path write_result(const BenchResult& result, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create results folder " + dir.string() + ": " + ec.message());
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &utc);
  std::string stem = result.benchmark();
  if (!result.label().empty()) stem += "_" + result.label();
  for (char& c : stem)  // the label is user text: keep the file name to a safe alphabet
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  stem += std::string("_") + stamp;
  fs::path path = dir / (stem + ".json");
  for (int i = 2; fs::exists(path); ++i) path = dir / (stem + "_" + std::to_string(i) + ".json");
  write_result_file(result, path);
  return path;
}

void write_result_file(const BenchResult& result, const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    throw IoError("cannot create folder " + path.parent_path().string() + ": " + ec.message());
  std::ofstream out(path);
  if (!out) throw IoError("cannot write benchmark result " + path.string());
  out << result.to_json().dump(1) << '\n';
  if (!out) throw IoError("failed writing benchmark result " + path.string());
}

}  // namespace infera::bench
