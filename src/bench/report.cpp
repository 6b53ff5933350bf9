#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace infera::bench {
namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string summary_table(const BenchResult& result) {
  size_t name_width = 6;
  for (const Metric& m : result.metrics())
    if (m.headline) name_width = std::max(name_width, m.name.size());
  std::string out = pad("metric", name_width) + "  " + pad("unit", 8) + "  " + pad("n", 4) + "  " +
                    pad("min", 9) + "  " + pad("p50", 9) + "  " + pad("p95", 9) + "  limit\n";
  const nlohmann::json& derived = result.derived();
  for (const Metric& m : result.metrics()) {
    if (!m.headline) continue;
    const Summary s = m.summary();
    std::string limit;
    if (derived.contains("fractions") && derived["fractions"].contains(m.name)) {
      const nlohmann::json& f = derived["fractions"][m.name];
      if (f.contains("fraction") && f["fraction"].is_number()) {
        char text[96];
        std::snprintf(text, sizeof text, "%.1f%% of %s", 100.0 * f["fraction"].get<double>(),
                      f.value("of", std::string("?")).c_str());
        limit = text;
      }
    }
    out += pad(m.name, name_width) + "  " + pad(m.unit, 8) + "  " +
           pad(std::to_string(s.count), 4) + "  " + pad(number(s.min), 9) + "  " +
           pad(number(s.p50), 9) + "  " + pad(number(s.p95), 9) + "  " + limit + "\n";
  }
  return out;
}

}  // namespace infera::bench
