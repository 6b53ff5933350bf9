// The pieces `infera eval` and `infera perplexity` score with: next-token comparisons (expected
// values in closed form) and the windowed logits (against the transformers fixture logits).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../model/fixture_cases.h"
#include "backend/registry.h"
#include "infera/error.h"
#include "next_token_metrics.h"
#include "test_compare.h"
#include "window_logits.h"

namespace infera::cli {
namespace {

TEST(NextTokenMetrics, KlTopOneAndNllOfKnownDistributions) {
  // P = (1/4, 3/4), Q = (1/2, 1/2): KL = 1/4 ln(1/2) + 3/4 ln(3/2).
  const std::vector<float> ref = {0.0f, static_cast<float>(std::log(3.0))};
  const std::vector<float> cand = {0.0f, 0.0f};
  const RowComparison c = compare_rows(ref, cand, 1);
  // (1e-7: ln 3 is rounded to float.)
  EXPECT_NEAR(c.kl, 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5), 1e-7);
  EXPECT_FALSE(c.same_top1);  // argmax P = 1, Q ties -> 0
  EXPECT_NEAR(c.reference_nll, -std::log(0.75), 1e-7);
  EXPECT_NEAR(c.candidate_nll, std::log(2.0), 1e-12);

  // Same denominators: log p_i - log q_i = z_i - z'_i, so KL = sum p_i (z_i - z'_i) = 2 (p3 - p1)
  // for z = (1, 2, 3), z' = (3, 2, 1); adding a constant to either side changes nothing.
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const double want = 2.0 * (std::exp(3.0) - std::exp(1.0)) / s;
  EXPECT_NEAR(compare_rows(std::vector<float>{1, 2, 3}, std::vector<float>{3, 2, 1}, 0).kl, want,
              1e-12);
  EXPECT_NEAR(compare_rows(std::vector<float>{1, 2, 3}, std::vector<float>{103, 102, 101}, 0).kl,
              want, 1e-12);

  const RowComparison same =
      compare_rows(std::vector<float>{1, 5, 2}, std::vector<float>{1, 5, 2}, 2);
  EXPECT_EQ(same.kl, 0.0);
  EXPECT_TRUE(same.same_top1);
  EXPECT_EQ(same.reference_nll, same.candidate_nll);
}

TEST(NextTokenMetrics, BadRowsAreErrors) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(compare_rows(std::vector<float>{1, 2}, std::vector<float>{1, nan}, 0), Error);
  EXPECT_THROW(compare_rows(std::vector<float>{1, 2}, std::vector<float>{1, 2, 3}, 0),
               InvalidArgument);
  EXPECT_THROW(compare_rows(std::vector<float>{1, 2}, std::vector<float>{1, 2}, 2),
               InvalidArgument);
  EXPECT_THROW(negative_log_likelihood(std::vector<float>{INFINITY, 1}, 0), Error);
}

TEST(NextTokenMetrics, TotalsCountRows) {
  ComparisonTotals t;
  t.add({.kl = 0.5, .same_top1 = true, .reference_nll = 1, .candidate_nll = 2});
  t.add({.kl = 0.25, .same_top1 = false, .reference_nll = 3, .candidate_nll = 5});
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.same_top1, 1);
  EXPECT_EQ(t.reference_nll, 4);
  EXPECT_EQ(t.candidate_nll, 7);
}

class Windows : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_backend({.device = "cpu", .threads = 1});
    model_ = load_causal_lm(test::fixture("qwen3-micro"), *backend_, {});
    c_ = test::load_lm_cases("qwen3-micro").at(0);  // "capital": logits at every position
    ASSERT_EQ(c_.logits_positions.size(), c_.input_ids.size());
  }
  std::span<const float> fixture_row(int64_t position) const {
    return std::span<const float>(c_.logits).subspan(static_cast<size_t>(position * c_.vocab),
                                                     static_cast<size_t>(c_.vocab));
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<CausalLM> model_;
  test::LmCase c_;
};

TEST_F(Windows, OneWindowGivesTheReferenceLogitsInAnyChunking) {
  for (int64_t chunk : {1, 2, 5}) {
    WindowedLogits w(*model_, c_.input_ids, 5, chunk);
    std::vector<int64_t> targets;
    while (w.next())
      for (int64_t r = 0; r < w.rows(); ++r) {
        targets.push_back(w.target_index(r));
        // Row predicting token t holds the logits at position t - 1.
        EXPECT_LT(test::max_abs_diff(w.row(r), fixture_row(w.target_index(r) - 1)), 1e-4);
      }
    EXPECT_EQ(targets, (std::vector<int64_t>{1, 2, 3, 4})) << chunk;
    EXPECT_EQ(w.windows(), 1);
  }
}

TEST_F(Windows, WindowsRestartFromAnEmptyCacheAndStopAtTheLimit) {
  // Windows [0, 3) and [3, 5): token 3 starts the second window and is predicted by nothing.
  WindowedLogits w(*model_, c_.input_ids, 3, 2);
  std::vector<int64_t> targets;
  while (w.next())
    for (int64_t r = 0; r < w.rows(); ++r) {
      targets.push_back(w.target_index(r));
      if (w.target_index(r) < 3)
        EXPECT_LT(test::max_abs_diff(w.row(r), fixture_row(w.target_index(r) - 1)), 1e-4);
      else  // token 4 from token 3 alone: not the fixture's row, which saw 0..3
        EXPECT_GT(test::max_abs_diff(w.row(r), fixture_row(3)), 1e-2);
    }
  EXPECT_EQ(targets, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(w.windows(), 2);

  WindowedLogits limited(*model_, c_.input_ids, 5, 1, 2);
  int64_t rows = 0;
  while (limited.next()) rows += limited.rows();
  EXPECT_EQ(rows, 2);
  EXPECT_THROW(WindowedLogits(*model_, c_.input_ids, 1, 1), InvalidArgument);
}

}  // namespace
}  // namespace infera::cli
