// The benchmark core's statistics, hash, result JSON and summary table. Expected percentiles
// come from numpy.percentile (method="linear", its default); tests/bench/make_stats_cases.py
// prints them. FNV-1a vectors are the published ones (draft-eastlake-fnv, "FNV-1a 64").
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "bench/hash.h"
#include "bench/report.h"
#include "bench/result.h"
#include "bench/stats.h"
#include "infera/error.h"

namespace infera::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(BenchStats, PercentilesMatchNumpyLinear) {
  // 1..20 shuffled: numpy.percentile -> p50 10.5, p95 19.05.
  std::vector<double> v = {7, 3, 20, 1, 14, 9, 2, 18, 5, 11, 16, 4, 19, 8, 13, 6, 17, 10, 15, 12};
  Summary s = summarize(v);
  EXPECT_EQ(s.count, 20);
  EXPECT_EQ(s.invalid, 0);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 20);
  EXPECT_DOUBLE_EQ(s.p50, 10.5);
  EXPECT_NEAR(s.p95, 19.05, 1e-12);
  EXPECT_DOUBLE_EQ(s.mean, 10.5);

  // An uneven spread: [3, 1, 2, 10] -> p50 2.5, p95 8.95.
  s = summarize({3, 1, 2, 10});
  EXPECT_DOUBLE_EQ(s.p50, 2.5);
  EXPECT_NEAR(s.p95, 8.95, 1e-12);
  EXPECT_DOUBLE_EQ(s.mean, 4.0);

  // One sample: every statistic is that sample.
  s = summarize({0.25});
  EXPECT_EQ(s.count, 1);
  EXPECT_DOUBLE_EQ(s.min, 0.25);
  EXPECT_DOUBLE_EQ(s.p50, 0.25);
  EXPECT_DOUBLE_EQ(s.p95, 0.25);
  EXPECT_DOUBLE_EQ(s.max, 0.25);
}

TEST(BenchStats, PercentileEdges) {
  const std::vector<double> sorted = {1, 2, 4};
  EXPECT_DOUBLE_EQ(percentile_sorted(sorted, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted(sorted, 100), 4);
  EXPECT_DOUBLE_EQ(percentile_sorted(sorted, 75), 3);  // index 1.5
  EXPECT_TRUE(std::isnan(percentile_sorted({}, 50)));
  EXPECT_TRUE(std::isnan(percentile_sorted(sorted, kNaN)));
}

TEST(BenchStats, NonFiniteSamplesAreCountedNotUsed) {
  // [NaN, 1, 2, inf, 3, -inf]: statistics of [1, 2, 3] -> p50 2, p95 2.9 (numpy).
  const Summary s = summarize({kNaN, 1, 2, kInf, 3, -kInf});
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.invalid, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.p50, 2);
  EXPECT_NEAR(s.p95, 2.9, 1e-12);
  EXPECT_DOUBLE_EQ(s.mean, 2);
}

TEST(BenchStats, NoFiniteSampleGivesNaNStatistics) {
  for (const std::vector<double>& v : {std::vector<double>{}, std::vector<double>{kNaN, kNaN}}) {
    const Summary s = summarize(v);
    EXPECT_EQ(s.count, 0);
    EXPECT_EQ(s.invalid, static_cast<int64_t>(v.size()));
    EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.p50) && std::isnan(s.p95) && std::isnan(s.max) &&
                std::isnan(s.mean));
  }
}

TEST(BenchHash, Fnv1a64PublishedVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64_hex("a"), "fnv1a64:af63dc4c8601ec8c");
}

BenchResult sample_result() {
  BenchResult r("unit_test");
  r.set_label("a/b c");
  r.set_command("infera bench --x");
  r.environment()["threads"] = 2;
  r.config()["repeats"] = 4;
  r.add_metric({.name = "prefill.8.tokens_per_second",
                .unit = "tokens/s",
                .higher_is_better = true,
                .headline = true,
                .samples = {3, 1, 2, 10}});
  r.series("step_seconds", "s", false, false).samples = {0.5, kNaN};
  r.derived()["fractions"]["prefill.8.tokens_per_second"] = {{"fraction", 0.25},
                                                             {"of", "f32 FMA peak 8 GFLOP/s"}};
  return r;
}

TEST(BenchResultJson, Shape) {
  // Through text and back, as a reader of the file sees it.
  const nlohmann::json j = nlohmann::json::parse(sample_result().to_json().dump());
  EXPECT_EQ(j["schema"], "infera.bench/1");
  EXPECT_EQ(j["benchmark"], "unit_test");
  EXPECT_EQ(j["label"], "a/b c");
  EXPECT_EQ(j["command"], "infera bench --x");
  EXPECT_EQ(j["environment"]["threads"], 2);
  EXPECT_EQ(j["config"]["repeats"], 4);
  ASSERT_TRUE(j["derived"]["fractions"].is_object());
  ASSERT_EQ(j["metrics"].size(), 2u);

  const nlohmann::json& m = j["metrics"]["prefill.8.tokens_per_second"];
  EXPECT_EQ(m["unit"], "tokens/s");
  EXPECT_EQ(m["better"], "higher");
  EXPECT_EQ(m["headline"], true);
  EXPECT_EQ(m["samples"], nlohmann::json({3.0, 1.0, 2.0, 10.0}));  // raw, in recorded order
  EXPECT_EQ(m["summary"]["count"], 4);
  EXPECT_EQ(m["summary"]["invalid"], 0);
  EXPECT_DOUBLE_EQ(m["summary"]["min"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(m["summary"]["p50"].get<double>(), 2.5);
  EXPECT_NEAR(m["summary"]["p95"].get<double>(), 8.95, 1e-12);
  EXPECT_DOUBLE_EQ(m["summary"]["max"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(m["summary"]["mean"].get<double>(), 4.0);

  // A NaN sample is written as null (JSON has no NaN) and counted as invalid.
  const nlohmann::json& s = j["metrics"]["step_seconds"];
  EXPECT_EQ(s["better"], "lower");
  EXPECT_EQ(s["headline"], false);
  ASSERT_EQ(s["samples"].size(), 2u);
  EXPECT_TRUE(s["samples"][1].is_null());
  EXPECT_EQ(s["summary"]["count"], 1);
  EXPECT_EQ(s["summary"]["invalid"], 1);
  EXPECT_DOUBLE_EQ(s["summary"]["p95"].get<double>(), 0.5);
}

TEST(BenchResultJson, AllInvalidSummaryIsNull) {
  BenchResult r("t");
  r.series("x", "s", false).samples = {kNaN};
  const nlohmann::json j = r.to_json();
  for (const char* key : {"min", "p50", "p95", "max", "mean"})
    EXPECT_TRUE(j["metrics"]["x"]["summary"][key].is_null()) << key;
}

TEST(BenchResultJson, MetricNamesAreUniqueAndUnitsConsistent) {
  BenchResult r("t");
  r.series("x", "s", false).samples.push_back(1);
  r.series("x", "s", false).samples.push_back(2);  // the same series
  EXPECT_EQ(r.find_metric("x")->samples.size(), 2u);
  EXPECT_THROW(r.series("x", "ms", false), InvalidArgument);
  EXPECT_THROW(r.series("x", "s", true), InvalidArgument);
  EXPECT_THROW(r.add_metric({.name = "x"}), InvalidArgument);
  EXPECT_THROW(r.add_metric({.name = ""}), InvalidArgument);
}

TEST(BenchResultJson, WriteNeverOverwritesAndSanitisesTheLabel) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("infera_bench_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const BenchResult r = sample_result();
  const fs::path a = write_result(r, dir / "nested");
  const fs::path b = write_result(r, dir / "nested");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.parent_path(), dir / "nested");
  EXPECT_EQ(a.filename().string().rfind("unit_test_a-b-c_", 0), 0u) << a;
  std::ifstream in(a);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j, nlohmann::json::parse(r.to_json().dump()));
  fs::remove_all(dir);
}

TEST(BenchReport, TableShowsHeadlineMetricsAndFractions) {
  const std::string table = summary_table(sample_result());
  EXPECT_NE(table.find("prefill.8.tokens_per_second"), std::string::npos) << table;
  EXPECT_NE(table.find("25.0% of f32 FMA peak 8 GFLOP/s"), std::string::npos) << table;
  EXPECT_NE(table.find("2.5 "), std::string::npos) << table;          // p50
  EXPECT_NE(table.find("8.95"), std::string::npos) << table;          // p95
  EXPECT_EQ(table.find("step_seconds"), std::string::npos) << table;  // not a headline
}

}  // namespace
}  // namespace infera::bench
